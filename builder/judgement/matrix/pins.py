"""Rules about the pins of a cell's packages: the ones EL9's and NVIDIA's repositories will keep
serving, and (reading the lock) the ones that are no longer what the last build installed."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

from builder.facts.cuda import BRANCH_SERIES_SOURCE, EXACT_PIN_KEPT_SOURCE, kept_in_every_build
from builder.facts.oses import repos_keep_source
from builder.facts.sources import MATRIX_YAML
from builder.judgement.finding import Finding
from builder.judgement.matrix.apply import LOCK_RECORD, LastBuild
from builder.judgement.registry import check
from builder.judgement.severity import OK, WARN
from builder.matrix.model import Cell, Pin
from builder.spec.os_install import os_install


def _os_pins(cell: Cell) -> list[Pin]:
    install = os_install(cell)
    devel = cell.os.devel_packages if cell.flavour == "devel" else ()
    return [*install.os_pins, *install.gcc_pins, *devel]


@check("os.pins", "matrix")
def _os_pins_kept(cell: Cell, today: dt.date) -> Iterator[Finding]:
    """EL OS packages pin what EL keeps serving (a series, or one build from a snapshot)"""
    if not cell.os.distro.is_el:
        return
    builds = [p for p in _os_pins(cell) if not p.series]
    if builds and cell.os.mirror is None:
        names = ", ".join(f"{p.name} {p.version}" for p in builds)
        yield Finding(
            "os.pins",
            WARN,
            f"oses.{cell.os.key} pins one build of {names}: {cell.os.distro.name}'s "
            "repositories keep only the current minor's builds, so it stops resolving at "
            "the next errata",
            remediation="pin the version series EL guarantees (e.g. '3.12', '11'), or build "
            "from a dated snapshot that keeps the build (matrix.yaml mirrors:)",
            sources=(repos_keep_source(cell.os.distro),),
            subject="os",
        )
        return
    series = ", ".join(f"{p.name} {p.version}" for p in _os_pins(cell) if p.series)
    yield Finding(
        "os.pins",
        OK,
        f"OS packages pinned to the series {cell.os.family.upper()} keeps serving ({series}), "
        "checked after install",
        sources=(repos_keep_source(cell.os.distro),),
        subject="os",
    )


@check("cuda.pins", "matrix")
def _nvidia_pins_kept(cell: Cell, today: dt.date) -> Iterator[Finding]:
    """NVIDIA's packages are pinned exactly only where its repository keeps every build"""
    repo = os_install(cell).cuda_repo
    if repo is None or not cell.os.distro.is_el:
        return
    pins = [*repo.runtime, *(repo.devel if cell.flavour == "devel" else ())]
    loose = [p for p in pins if not p.series and not kept_in_every_build(p.name)]
    if loose:
        names = ", ".join(f"{p.name} {p.version}" for p in loose)
        yield Finding(
            "cuda.pins",
            WARN,
            f"cuda.{cell.cuda.version if cell.cuda else ''}.{cell.os.family} pins one build of "
            f"{names}: "
            "no fact says NVIDIA's repository (or a mirror of it) keeps every build of it, so "
            "a repository without that build fails the os stage",
            remediation="pin its driver branch series (e.g. cuda-compat-12-8: '570.*', checked "
            "after install; the lock records the build)",
            sources=(EXACT_PIN_KEPT_SOURCE, BRANCH_SERIES_SOURCE),
            subject="cuda",
        )
        return
    series = ", ".join(_shown(p) for p in pins if p.series) or "none"
    yield Finding(
        "cuda.pins",
        OK,
        f"NVIDIA's toolkit packages pinned exactly (its repository keeps every build); by "
        f"branch series, checked after install: {series}",
        sources=(EXACT_PIN_KEPT_SOURCE,),
        subject="cuda",
    )


def _shown(pin: Pin) -> str:
    """A pin as the matrix spells it: 'gcc 11', 'cuda-compat-12-8 570.*'."""
    return f"{pin.name} {pin.version}{'.*' if pin.glob else ''}"


def _in_series(version: str, series: str) -> bool:
    return version == series or version.startswith(series + ".")


def _evr(installed: str) -> tuple[str, str, str]:
    """'2:4.9-15.el9.x86_64' -> ('2', '4.9', '15.el9')."""
    evr = installed.rsplit(".", 1)[0]
    epoch, _, rest = evr.partition(":")
    version, _, release = rest.rpartition("-")
    return epoch, version, release


def _matches(pin: Pin, installed: str) -> bool:
    epoch, version, release = _evr(installed)
    if pin.series:
        return _in_series(version, pin.version)
    want_epoch, sep, want = pin.version.partition(":")
    if not sep:
        want_epoch, want = "", pin.version
    if want_epoch and want_epoch != epoch:
        return False
    return want in (version, f"{version}-{release}")


@check("os.pins-recorded", "matrix", reads=(LOCK_RECORD,))
def _pins_recorded(cell: Cell, record: LastBuild, today: dt.date) -> Iterator[Finding]:
    """each pin is what the repositories served at the cell's last build (its lock record)"""
    if not record.packages:
        return
    pins = _os_pins(cell)
    repo = os_install(cell).cuda_repo
    if repo is not None:
        pins += [*repo.runtime]
        if cell.flavour == "devel":
            pins += [*repo.devel]
    stale = [
        f"{_shown(p)} (built {record.packages[p.name].rsplit('.', 1)[0]})"
        for p in pins
        if p.name in record.packages and not _matches(p, record.packages[p.name])
    ]
    when = record.built_at[:10]
    if stale:
        yield Finding(
            "os.pins-recorded",
            WARN,
            f"the matrix pins {', '.join(stale)}: not what the repositories served at the last "
            f"build ({when}, images/lock.json)",
            remediation=f"rebuild {cell.name} (trainimg build) and check what it installs",
            sources=(MATRIX_YAML,),
            subject="os",
        )
        return
    yield Finding(
        "os.pins-recorded",
        OK,
        f"every pin is what the last build ({when}) installed ({len(record.packages)} RPMs "
        "recorded)",
        sources=(MATRIX_YAML,),
        subject="os",
    )
