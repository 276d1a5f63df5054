"""Rules about the pins of a cell's packages: the ones EL9's repositories will keep serving,
and (reading the lock) the ones that are no longer what the last build installed."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

from builder.facts.oses import EL9_REPOS_KEEP_CURRENT_MINOR
from builder.facts.sources import MATRIX_YAML
from builder.judgement.finding import Finding
from builder.judgement.matrix.apply import LOCK_RECORD
from builder.judgement.registry import check
from builder.judgement.severity import OK, WARN
from builder.lock import BuildRecord
from builder.matrix.model import Cell, Pin
from builder.os_install import os_install


def _os_pins(cell: Cell) -> list[Pin]:
    install = os_install(cell)
    devel = cell.os.devel_packages if cell.flavour == "devel" else ()
    return [*install.os_pins, *install.gcc_pins, *devel]


@check("os.pins", "matrix")
def _os_pins_kept(cell: Cell, today: dt.date) -> Iterator[Finding]:
    """EL9 OS packages pin what EL keeps serving (a series, or one build from a snapshot)"""
    if cell.os.family != "el9":
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
            sources=(EL9_REPOS_KEEP_CURRENT_MINOR,),
            subject="os",
        )
        return
    series = ", ".join(f"{p.name} {p.version}" for p in _os_pins(cell) if p.series)
    yield Finding(
        "os.pins",
        OK,
        f"OS packages pinned to the series EL9 keeps serving ({series}), checked after install",
        sources=(EL9_REPOS_KEEP_CURRENT_MINOR,),
        subject="os",
    )


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
def _pins_recorded(cell: Cell, record: BuildRecord, today: dt.date) -> Iterator[Finding]:
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
        f"{p.name} {p.version} (built {record.packages[p.name].rsplit('.', 1)[0]})"
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
