"""Rules about the cell's driver group: kernel modules that exist for its branch, and the
branch's place in NVIDIA's lifecycle."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

from builder.facts import drivers as driver_rules
from builder.facts import sources
from builder.judgement.finding import Finding
from builder.judgement.registry import check
from builder.judgement.severity import BLOCK, OK, WARN
from builder.matrix.model import Cell


@check("driver.module", "matrix")
def _driver_module(cell: Cell, today: dt.date) -> Iterator[Finding]:
    """the driver branch ships the kernel modules the group names"""
    drv = cell.driver
    if drv is None:
        return
    src = (driver_rules.MODULE_SOURCE,)
    if (
        drv.kernel_module == "proprietary"
        and drv.branch >= driver_rules.PROPRIETARY_REMOVED_FROM_BRANCH
    ):
        yield Finding(
            "driver.module",
            BLOCK,
            f"branch {drv.branch} has no proprietary kernel modules (removed from "
            f"R{driver_rules.PROPRIETARY_REMOVED_FROM_BRANCH})",
            sources=src,
            subject="driver",
        )
    else:
        yield Finding(
            "driver.module",
            OK,
            f"{drv.key} uses the {drv.kernel_module} kernel modules",
            sources=src,
            subject="driver",
        )


@check("driver.eol", "matrix")
def _driver_eol(cell: Cell, today: dt.date) -> Iterator[Finding]:
    """the driver branch has a published end of life that has not passed"""
    drv = cell.driver
    if drv is None:
        return
    life = driver_rules.BRANCH_LIFECYCLE.get(drv.branch)
    if life is None or life.eol is None:
        yield Finding(
            "driver.eol",
            WARN,
            f"no end-of-life date is published for R{drv.branch}: check NVIDIA's "
            "driver lifecycle before relying on it",
            sources=(sources.DATACENTER_DRIVER_LIFECYCLE,),
            subject="driver",
        )
    elif life.eol < today:
        yield Finding(
            "driver.eol",
            WARN,
            f"R{drv.branch} ({life.kind}) reached end of life on {life.eol}",
            sources=(life.source,),
            subject="driver",
        )
    else:
        yield Finding(
            "driver.eol",
            OK,
            f"R{drv.branch} ({life.kind}) is supported until {life.eol}",
            sources=(life.source,),
            subject="driver",
        )
