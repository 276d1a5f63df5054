"""Host check of the GPUs (pure): NVML and lspci merged, each against its minimum branch."""

from __future__ import annotations

import datetime as dt

from builder.facts.driver_version import DriverVersion
from builder.facts.sources import CUDA_GPUS
from builder.judgement.finding import Finding
from builder.judgement.registry import check
from builder.judgement.severity import BLOCK, OK, WARN
from builder.preflight.checks.common import (
    gpu_summary,
    is_driver_version,
)
from builder.preflight.host_gpus import HostGpu
from builder.preflight.host_state import HostState
from builder.preflight.model import UpgradePlan


@check("gpu.inventory", "host", reads=("driver", "gpus"))
def gpu_inventory(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Which GPUs are there (NVML and lspci), and does the driver branch drive each?"""
    srcs = (CUDA_GPUS,)
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
    parts, sev, fix = [], OK, ""
    branch = (
        DriverVersion(state.driver).major
        if state.driver and is_driver_version(state.driver)
        else None
    )
    for group in _groups(state.gpus).values():
        g = group[0]
        floor = g.min_branch
        brand = g.product_brand or "?"
        desc = f"{len(group)}x {g.name} (CC {g.cc_text}, brand {brand} -> {g.libnvc_brand!r}; " + (
            f"needs R{floor}+" if floor else "minimum branch unknown"
        )
        if g.needs_open_modules:
            desc += ", open modules only"
        parts.append(desc + ")")
        if g.catalogue is None:
            sev = WARN if sev is OK else sev
            fix = "add the GPU to builder/facts/gpus.py with its source"
        if floor and branch and branch < floor:
            sev, fix = BLOCK, f"{g.name} needs driver branch R{floor} or newer"
    pci_only = [g for g in state.gpus if g.source == "lspci"]
    if pci_only:
        target = plan.target.major if plan.target else None
        by_reason: dict[str, list[HostGpu]] = {}
        for g in pci_only:
            by_reason.setdefault(g.pci_note, []).append(g)
        for note, group in by_reason.items():
            buses = ", ".join(g.bus_id for g in group[:4]) + (", ..." if len(group) > 4 else "")
            parts.append(f"seen on PCI only (not in NVML): {gpu_summary(group)} at {buses}: {note}")
        driven_later = [
            g
            for g in pci_only
            if target and g.min_branch and target >= g.min_branch and "vfio" not in g.pci_note
        ]
        if sev is BLOCK and driven_later and len(driven_later) == len(pci_only):
            sev = WARN  # the planned driver drives them: the upgrade is the fix
            fix = f"the upgrade to {plan.target} brings them up; check they appear in nvidia-smi"
        elif sev is OK:
            sev = WARN
            fix = (
                "nothing to do for vfio-bound GPUs; otherwise load a driver that supports "
                "them (the rules above still apply to the plan)"
            )
    return Finding(cid, sev, "; ".join(parts), fix, srcs)


def _groups(gpus: list[HostGpu]) -> dict[str, list[HostGpu]]:
    out: dict[str, list[HostGpu]] = {}
    for g in gpus:
        out.setdefault(f"{g.name}|{g.cc}", []).append(g)
    return out
