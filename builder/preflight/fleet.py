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
from builder.judgement.gpu_identity import GpuIdentity
from builder.judgement.image_facts import DriverState
from builder.preflight import allowlist
from builder.preflight import images as img
from builder.preflight.checks import run_checks
from builder.preflight.checks.reach import reach
from builder.preflight.gather import gather
from builder.preflight.host_state import HostState
from builder.preflight.hostio import HostUnreachable, ReadOnlyHost, connect, connect_validated
from builder.preflight.impact import impact, impact_check
from builder.preflight.inventory import Target
from builder.preflight.model import UpgradePlan
from builder.preflight.record import Record, ReplayHost, write_record
from builder.preflight.record_files import RecordError
from builder.preflight.report import HostReport
from builder.preflight.ssh_transport import SshOptions

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
    ssh_control_dir: str | None = None  # ssh master sockets: one connection per host
    ssh: SshOptions = field(default_factory=SshOptions)  # BatchMode, timeouts, keepalives
    host_timeout: int | None = None  # seconds a host may take in all (--host-timeout)


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
        "driver": _text(state.driver),
        "driver_loaded": _text(state.loaded_driver),
        "driver_installed": _text(state.installed_driver),
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
                "identified_by": g.identity.how,
            }
            for g in state.gpus
        ],
        "probes": {k: {"command": o.command, "rc": o.rc} for k, o in state.outputs.items()},
        "probe_errors": dict(state.errors),
    }


def _text(version: DriverVersion | None) -> str | None:
    return str(version) if version is not None else None


def driver_now(state: HostState) -> DriverState | None:
    """The driver that runs now, as the image judgement reads it: the loaded module (and the
    CUDA version nvidia-smi reports for it); under an NVML mismatch CUDA cannot start."""
    if state.driver is None:
        return None
    return DriverState(state.driver, state.flavour, _reported_cuda(state), state.nvml_mismatch)


def driver_planned(state: HostState, plan: UpgradePlan) -> DriverState | None:
    if plan.target is None:
        return None
    return DriverState(plan.target, plan.flavour(state))


def _judged_gpus(state: HostState) -> tuple[GpuIdentity, ...]:
    """The GPUs an image runs on: all but those passed through to a VM."""
    return tuple(g.identity for g in state.gpus if "vfio" not in g.pci_note)


def _images(state: HostState, ctx: FleetInputs) -> tuple[list[img.ImageRecord], list[str]]:
    records = list(ctx.images)
    notes = list(ctx.image_notes)
    if ctx.local_images:
        local, skipped = img.from_local(state.images)
        records += local
        listed = state.out("podman-images")
        if state.podman_store_note:
            notes.append(state.podman_store_note)
        elif listed is not None and not listed.ok:
            notes.append(f"local images not listed: {listed.why()}")
        elif skipped:
            notes.append(f"{skipped} local image(s) without a GPU requirement")
    return records, notes


def judge_state(state: HostState, ctx: FleetInputs) -> HostReport:
    """The host's two verdicts: as it is now, and, with a target, after the plan (each check
    judges the plan's driver where the plan changes what it looks at)."""
    records, notes = _images(state, ctx)
    gpus = _judged_gpus(state)
    now_plan = UpgradePlan(None, None, ctx.plan.strict, ctx.plan.repos)
    now_rows = impact(records, gpus, driver_now(state), None, ctx.today)
    now_checks = run_checks(state, now_plan, ctx.today)
    now_checks.append(impact_check(now_rows, None, notes))
    if ctx.plan.target is None:
        return HostReport(state.name, now_checks, now_rows, host_facts(state))
    rows = impact(records, gpus, driver_now(state), driver_planned(state, ctx.plan), ctx.today)
    checks = run_checks(state, ctx.plan, ctx.today)
    checks.append(impact_check(rows, ctx.plan.target, notes))
    return HostReport(state.name, checks, rows, host_facts(state), now_checks=now_checks)


def _reported_cuda(state: HostState) -> Version | None:
    """The CUDA version nvidia-smi prints for the running driver (a live host's own word)."""
    text = state.smi_q.cuda if state.smi_q else ""
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


def _table_cuda(state: HostState) -> Version | None:
    return driver_rules.driver_cuda_version(state.driver) if state.driver else None


def record_name(host: str) -> str:
    """A directory name for a host's record (its name, with anything odd replaced)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", host).strip(".") or "host"


def unreachable(name: str, why: str, fix: str = "") -> HostReport:
    return HostReport(name, [reach(None, why, fix)], reachable=False)


RECORD_FIX = (
    "record the host again (preflight --record DIR); a record is untrusted input and this one "
    "was refused before anything it names was read; the other hosts were still judged"
)


def preflight_host(target: Target, ctx: FleetInputs, connect_fn: Connect = connect) -> HostReport:
    if target.spec is None:
        return unreachable(target.name, target.error or "no connection for this host")
    host: ReadOnlyHost | None = None
    try:
        if target.record is not None:  # a recorded host (--from): replayed, nothing reached
            rec = target.loaded or Record.load(target.record, target.name)
            host = ReadOnlyHost(ReplayHost(rec), target.name)
        elif target.connection is not None:  # an inventory host: fields as arguments, no URL
            host = connect_validated(
                target.connection, ctx.timeout, ctx.ssh_control_dir, ctx.ssh, ctx.host_timeout
            )
        else:
            host = connect_fn(target.spec)
        state = gather(host, images=ctx.local_images, repos=ctx.plan if ctx.plan.repos else None)
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
    except RecordError as exc:  # a fleet's unreadable or hostile record: that host's error
        return unreachable(target.name, f"record refused: {exc}", RECORD_FIX)
    except Exception as exc:  # a bug must not hide the other hosts' reports
        if os.environ.get("TRAINIMG_DEBUG"):
            raise
        return unreachable(
            target.name,
            f"preflight failed on this host: {type(exc).__name__}: {exc} (please report it)",
        )
    finally:
        if host is not None:
            host.close()
    report.checks.insert(0, reach(target.spec))
    return report


def run_fleet(
    targets: list[Target], ctx: FleetInputs, jobs: int = 4, connect_fn: Connect = connect
) -> list[HostReport]:
    """Every target's report, in the targets' order. A recorded host is loaded by the worker
    that judges it and dropped after: memory holds `jobs` records and the reports, not the
    fleet's records."""
    if len(targets) == 1 or jobs <= 1:
        return [preflight_host(t, ctx, connect_fn) for t in targets]
    with ThreadPoolExecutor(max_workers=min(jobs, len(targets))) as pool:
        return list(pool.map(lambda t: preflight_host(t, ctx, connect_fn), targets))
