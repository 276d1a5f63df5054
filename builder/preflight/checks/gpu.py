"""Host check of the GPUs (pure): NVML and lspci merged, each identified (PCI id first, NVML
name second) and judged against the driver branch now, or the plan's."""

from __future__ import annotations

import datetime as dt

from builder.facts.sources import CUDA_GPUS, Source
from builder.judgement.finding import Finding
from builder.judgement.gpu_identity import NOT_IN_CATALOGUE
from builder.judgement.image import driver_gpu_findings
from builder.judgement.image_facts import DriverState
from builder.judgement.registry import check
from builder.judgement.severity import BLOCK, OK, WARN, Severity, worst
from builder.preflight.checks.common import gpu_summary
from builder.preflight.host_gpus import OFF_THE_BUS, HostGpu
from builder.preflight.host_state import HostState
from builder.preflight.model import UpgradePlan

_CODES = ("gpu.branch-too-old", "gpu.branch-dropped")


@check("gpu.inventory", "host", reads=("driver", "gpus"))
def gpu_inventory(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Which GPUs are there (NVML and lspci), and does the driver branch (now, or the plan's)
    drive each?"""
    srcs: tuple[Source, ...] = (CUDA_GPUS,)
    if not state.gpus:
        return Finding(
            cid,
            WARN,
            "no NVIDIA GPU is visible (nvidia-smi lists none"
            + ("" if state.pci is not None else "; lspci not installed")
            + ")",
            "run preflight on the GPU hosts",
            srcs,
        )
    parts: list[str] = []
    sev: Severity = OK
    fix, reason = "", ""
    for group in _groups(state.gpus).values():
        g = group[0]
        floor, last = g.identity.min_branch, g.identity.last_branch
        brand = g.product_brand or "?"
        span = f"R{floor}+" if floor else "minimum branch unknown"
        if last:
            span += f", up to R{last}"
        desc = (
            f"{len(group)}x {g.name} (CC {g.cc_text}, brand {brand} -> {g.libnvc_brand!r}; "
            f"{span}; by {g.identity.how}"
        )
        if g.needs_open_modules:
            desc += ", open modules only"
        parts.append(desc + ")")
        if not g.identity.known:
            sev, reason = BLOCK, "gpu.unidentified"
            fix = (
                "identify the board (`lspci -nn -d 10de:` device id) and add it to "
                "builder/facts/pci_ids.py with its source: nothing can be cleared for it"
            )
        elif g.identity.how == NOT_IN_CATALOGUE and sev is OK:
            sev, reason = WARN, "gpu.not-in-catalogue"
            fix = "add the GPU to builder/facts/gpus.py with its source"
    driver = plan.target or state.driver
    if driver is not None:
        judged = tuple(g.identity for g in state.gpus if "vfio" not in g.pci_note)
        found = [f for f in driver_gpu_findings(DriverState(driver), judged) if f.reason in _CODES]
        for f in found:
            parts.append(f.message)
            srcs += f.sources
        if found:
            sev, fix, reason = BLOCK, found[0].remediation, found[0].reason
    pci_only = [g for g in state.gpus if g.pci_only]
    if pci_only:
        by_reason: dict[str, list[HostGpu]] = {}
        for g in pci_only:
            by_reason.setdefault(g.pci_note, []).append(g)
        for note, group in by_reason.items():
            buses = ", ".join(g.bus_id for g in group[:4]) + (", ..." if len(group) > 4 else "")
            parts.append(f"seen on PCI only (not in NVML): {gpu_summary(group)} at {buses}: {note}")
        lost = [g for g in pci_only if g.pci_note == OFF_THE_BUS]
        if lost and sev is not BLOCK:  # gone until a reboot, plan or not (broken now, kind.py)
            sev = BLOCK
            fix = (
                "reboot the host to recover the GPU, then run DCGM diagnostics (dcgmi diag -r 3) "
                "before any driver change: no driver brings it back"
            )
        if sev is OK:
            sev = worst((sev, WARN))
            fix = (
                f"the upgrade to {plan.target} must bring them up; check they appear in "
                "nvidia-smi afterwards"
                if plan.target
                else "nothing to do for vfio-bound GPUs; otherwise load a driver that supports "
                "them (the rules above still apply to the plan)"
            )
    return Finding(cid, sev, "; ".join(parts), fix, tuple(dict.fromkeys(srcs)), reason=reason)


def _groups(gpus: list[HostGpu]) -> dict[str, list[HostGpu]]:
    out: dict[str, list[HostGpu]] = {}
    for g in gpus:
        out.setdefault(f"{g.name}|{g.cc}", []).append(g)
    return out
