"""Run preflight on one host or a fleet, in parallel; one bad host never stops the others.

`preflight_host` reads one host and judges it; `run_fleet` does that for every target on a
thread pool (`--jobs`). Anything that goes wrong with one host (unreachable, a spec testinfra
does not know, a surprise inside preflight) becomes that host's `host.reach` finding.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from builder.facts import drivers as driver_rules
from builder.facts.driver_version import DriverVersion
from builder.preflight import allowlist
from builder.preflight import images as img
from builder.preflight.checks import run_checks
from builder.preflight.checks.common import is_driver_version
from builder.preflight.checks.reach import reach
from builder.preflight.gather import gather
from builder.preflight.host_state import HostState
from builder.preflight.hostio import HostUnreachable, ReadOnlyHost, connect, connect_validated
from builder.preflight.impact import impact, impact_check
from builder.preflight.inventory import Target
from builder.preflight.model import UpgradePlan
from builder.preflight.record import Record, ReplayHost, write_record
from builder.preflight.report import HostReport

Connect = Callable[[str], ReadOnlyHost]


@dataclass(frozen=True)
class FleetInputs:
    """What every host is judged against: the plan, the day, and the images not on the host."""

    plan: UpgradePlan
    today: dt.date
    images: list[img.ImageRecord] = field(default_factory=list)
    image_notes: list[str] = field(default_factory=list)
    local_images: bool = True
    timeout: int = allowlist.TIMEOUT_S  # seconds per probe
    record_dir: Path | None = None  # --record DIR: write what each host returned


def host_facts(state: HostState) -> dict[str, Any]:
    """What the report's header and JSON `facts` say about the host (the state, summarised)."""
    gpus = ", ".join(
        dict.fromkeys(
            f"{sum(1 for h in state.gpus if h.name == g.name)}x {g.name}" for g in state.gpus
        )
    )
    return {
        "os": state.os.pretty_name if state.os else None,
        "kernel": state.kernel,
        "default_kernel": state.default_kernel,
        "driver": state.driver,
        "driver_loaded": state.loaded_driver,
        "driver_installed": state.installed_driver,
        "reboot_pending": state.reboot_pending,
        "cuda": {
            "reported": state.smi_q.cuda if state.smi_q and state.smi_q.cuda else None,
            "rules": str(c) if (c := _table_cuda(state)) else None,
        },
        "kernel_module": state.flavour,
        "gpus": gpus or "no GPU",
        "gpu_list": [
            {
                "index": g.index,
                "name": g.name,
                "uuid": g.uuid,
                "compute_cap": g.cc_text,
                "brand": g.product_brand,
                "libnvidia_container_brand": g.libnvc_brand,
                "catalogue": g.catalogue.key if g.catalogue else None,
            }
            for g in state.gpus
        ],
        "probes": {k: {"command": o.command, "rc": o.rc} for k, o in state.outputs.items()},
        "probe_errors": dict(state.errors),
    }


def judge_state(state: HostState, ctx: FleetInputs) -> HostReport:
    checks = run_checks(state, ctx.plan, ctx.today)
    records = list(ctx.images)
    notes = list(ctx.image_notes)
    if ctx.local_images:
        local, skipped = img.from_local(state.images)
        records += local
        listed = state.out("podman-images")
        if listed is not None and not listed.ok:
            notes.append(f"local images not listed: {listed.why()}")
        elif skipped:
            notes.append(f"{skipped} local image(s) without a GPU requirement")
    current = (
        DriverVersion(state.driver) if state.driver and is_driver_version(state.driver) else None
    )
    rows = impact(
        records,
        [g for g in state.gpus if "vfio" not in g.pci_note],  # a passed-through GPU runs no image
        current,
        state.flavour,
        ctx.plan.target,
        ctx.plan.flavour(state),
        _reported_cuda(state),
    )
    checks.append(impact_check(rows, ctx.plan.target, notes))
    return HostReport(state.name, checks, rows, host_facts(state))


def _reported_cuda(state: HostState) -> Version | None:
    """The CUDA version nvidia-smi prints for the running driver (a live host's own word)."""
    text = state.smi_q.cuda if state.smi_q else ""
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


def _table_cuda(state: HostState) -> Version | None:
    if not state.driver or not is_driver_version(state.driver):
        return None
    return driver_rules.driver_cuda_version(DriverVersion(state.driver))


def record_name(host: str) -> str:
    """A directory name for a host's record (its name, with anything odd replaced)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", host).strip(".") or "host"


def unreachable(name: str, why: str) -> HostReport:
    return HostReport(name, [reach(None, why)], reachable=False)


def preflight_host(target: Target, ctx: FleetInputs, connect_fn: Connect = connect) -> HostReport:
    if target.spec is None:
        return unreachable(target.name, target.error or "no connection for this host")
    try:
        if target.record is not None:  # a recorded host (--from): replayed, nothing reached
            host = ReadOnlyHost(ReplayHost(Record.load(target.record, target.name)), target.name)
        elif target.connection is not None:  # an inventory host: fields as arguments, no URL
            host = connect_validated(target.connection, ctx.timeout)
        else:
            host = connect_fn(target.spec)
        state = gather(host, images=ctx.local_images)
        state.name = target.name
        if ctx.record_dir is not None:
            write_record(
                ctx.record_dir / record_name(target.name),
                target.name,
                target.spec,
                host.log,
                ctx.today,
            )
        report = judge_state(state, ctx)
    except HostUnreachable as exc:
        return unreachable(target.name, f"unreachable: {exc}")
    except Exception as exc:  # a bug must not hide the other hosts' reports
        if os.environ.get("TRAINIMG_DEBUG"):
            raise
        return unreachable(
            target.name,
            f"preflight failed on this host: {type(exc).__name__}: {exc} (please report it)",
        )
    report.checks.insert(0, reach(target.spec))
    return report


def run_fleet(
    targets: list[Target], ctx: FleetInputs, jobs: int = 4, connect_fn: Connect = connect
) -> list[HostReport]:
    if len(targets) == 1 or jobs <= 1:
        return [preflight_host(t, ctx, connect_fn) for t in targets]
    with ThreadPoolExecutor(max_workers=min(jobs, len(targets))) as pool:
        return list(pool.map(lambda t: preflight_host(t, ctx, connect_fn), targets))
