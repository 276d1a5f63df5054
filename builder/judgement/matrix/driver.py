"""Rules about the cell's driver group: kernel modules that exist for its branch, and the
branch's place in NVIDIA's lifecycle (builder/judgement/driver_life.py: the same standing
preflight gives the branch on the same day)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

from builder.facts import drivers as driver_rules
from builder.judgement.driver_life import branch_life
from builder.judgement.finding import Finding
from builder.judgement.image import driver_gpu_findings
from builder.judgement.image_facts import DriverState
from builder.judgement.registry import check
from builder.judgement.severity import OK
from builder.matrix.model import Cell


@check("driver.module", "matrix")
def _driver_module(cell: Cell, today: dt.date) -> Iterator[Finding]:
    """the driver branch ships the kernel modules the group names"""
    drv = cell.driver
    if drv is None:
        return
    src = (driver_rules.MODULE_SOURCE,)
    found = driver_gpu_findings(DriverState(drv.min_version, drv.kernel_module), ())
    for f in found:
        yield Finding("driver.module", f.severity, f.message, f.remediation, src, "driver",
                      f.reason)  # fmt: skip
    if not found:
        yield Finding(
            "driver.module",
            OK,
            f"{drv.key} uses the {drv.kernel_module} kernel modules",
            sources=src,
            subject="driver",
        )


@check("driver.eol", "matrix")
def _driver_eol(cell: Cell, today: dt.date) -> Iterator[Finding]:
    """the driver branch is in NVIDIA's lifecycle and not past (or near) its end of life"""
    drv = cell.driver
    if drv is None:
        return
    life = branch_life(drv.branch, today)
    yield Finding(
        "driver.eol", life.severity, life.message, life.remediation, life.sources, "driver",
        life.reason,
    )  # fmt: skip
