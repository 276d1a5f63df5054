"""Rules about the cell's OS and its base image: Python, gcc, glibc, end of life, pinning."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

from builder.facts import torch_builds
from builder.facts.oses import EOL_WARN_DAYS, glibc_source
from builder.facts.sources import MATRIX_YAML
from builder.judgement.finding import Finding
from builder.judgement.registry import check
from builder.judgement.severity import BLOCK, OK, WARN
from builder.matrix.model import Cell
from builder.spec.labels import BASE_PINNED_LABEL


@check("os.python", "matrix")
def _os_python(cell: Cell, today: dt.date) -> Iterator[Finding]:
    """the OS ships the cell's Python and the matrix pins its package"""
    d = cell.os.distro
    if cell.python not in d.pythons:
        yield Finding(
            "os.python",
            BLOCK,
            f"{d.name} ships Python {', '.join(d.pythons)}, not {cell.python}",
            sources=(d.source,),
            subject="python",
        )
    elif cell.python not in cell.os.python:
        yield Finding(
            "os.python",
            BLOCK,
            f"oses.{cell.os.key}.python has no package pin for Python {cell.python}",
            sources=(MATRIX_YAML,),
            subject="python",
        )
    else:
        pin = cell.os.python[cell.python]
        how = f"{pin.name} {pin.version}" if pin.version else f"{pin.name} (in the base image)"
        yield Finding(
            "os.python",
            OK,
            f"{d.name} ships Python {cell.python}: {how}",
            sources=(d.source,),
            subject="python",
        )


@check("os.gcc", "matrix")
def _os_gcc(cell: Cell, today: dt.date) -> Iterator[Finding]:
    """devel: the OS ships the cell's gcc and the matrix pins its packages"""
    if cell.flavour != "devel":
        return
    d = cell.os.distro
    if int(cell.gcc) not in d.gcc_majors:
        yield Finding(
            "os.gcc",
            BLOCK,
            f"{d.name} ships gcc {', '.join(map(str, d.gcc_majors))}, not gcc {cell.gcc}",
            sources=(glibc_source(d),),
            subject="gcc",
        )
    elif cell.gcc not in cell.os.gcc:
        yield Finding(
            "os.gcc",
            BLOCK,
            f"oses.{cell.os.key}.gcc has no package pins for gcc {cell.gcc} "
            "(devel images install it)",
            sources=(MATRIX_YAML,),
            subject="gcc",
        )
    else:
        pins = ", ".join(f"{p.name} {p.version}" for p in cell.os.gcc[cell.gcc])
        yield Finding(
            "os.gcc",
            OK,
            f"devel flavour installs gcc {cell.gcc}: {pins}",
            sources=(glibc_source(d),),
            subject="gcc",
        )


@check("os.glibc", "matrix")
def _os_glibc(cell: Cell, today: dt.date) -> Iterator[Finding]:
    """the OS's glibc is new enough for torch's manylinux wheels"""
    d = cell.os.distro
    floor = torch_builds.MANYLINUX_GLIBC
    yield Finding(
        "os.glibc",
        OK if d.glibc >= floor else BLOCK,
        f"{d.name} has glibc {d.glibc}; torch's manylinux_2_28 wheels need >= {floor}",
        sources=(glibc_source(d), torch_builds.MANYLINUX_SOURCE),
        subject="os",
    )


@check("os.eol", "matrix")
def _os_eol(cell: Cell, today: dt.date) -> Iterator[Finding]:
    """the OS release is supported (warns within EOL_WARN_DAYS of its end of life)"""
    d = cell.os.distro
    left = (d.eol - today).days
    if left < 0:
        message = f"{d.name} reached end of life on {d.eol}"
    elif left <= EOL_WARN_DAYS:
        message = f"{d.name} reaches end of life on {d.eol} ({left} days)"
    else:
        yield Finding(
            "os.eol",
            OK,
            f"{d.name} is supported until {d.eol}",
            sources=(d.eol_source,),
            subject="os",
        )
        return
    yield Finding("os.eol", WARN, message, sources=(d.eol_source,), subject="os")


@check("base.pinned", "matrix")
def _base_pinned(cell: Cell, today: dt.date) -> Iterator[Finding]:
    """the base image is pinned by digest (or made locally)"""
    if cell.os.local:
        message = f"base {cell.os.base} is made locally (trainimg base), never pulled"
    elif cell.os.digest:
        message = f"base pinned by digest: {cell.os.base_ref}"
    else:
        yield Finding(
            "base.pinned",
            WARN,
            f"base {cell.os.base} is not pinned by digest: the image is labelled "
            f"{BASE_PINNED_LABEL}=false; add oses.{cell.os.key}.digest",
            sources=(MATRIX_YAML,),
            subject="os",
        )
        return
    yield Finding("base.pinned", OK, message, sources=(MATRIX_YAML,), subject="os")
