"""What several host checks read off HostState the same way (pure helpers, no check here)."""

from __future__ import annotations

from collections import Counter

from packaging.version import InvalidVersion, Version

from builder.facts import host as host_rules
from builder.preflight.host_gpus import HostGpu
from builder.preflight.host_state import HostState
from builder.preflight.model import UpgradePlan


def loose_version(text: str | None) -> Version | None:
    """A tool's version without its package suffix (1.17.8-1, 5.2.2~rc1); None when none."""
    if not text:
        return None
    try:
        return Version(text.split("-")[0].split("~")[0])
    except InvalidVersion:
        return None


def gpu_summary(gpus: list[HostGpu]) -> str:
    """The GPUs by kind, for a finding: "8x NVIDIA H100 (9.0)"."""
    counts = Counter(f"{g.name} ({g.cc_text})" for g in gpus)
    return ", ".join(f"{n}x {name}" if n > 1 else name for name, n in counts.items())


def has_nvidia(state: HostState, plan: UpgradePlan) -> bool:
    """Is there anything NVIDIA here to judge (a GPU, a driver, or a planned install)?"""
    pci = state.pci.gpus if state.pci else ()
    return bool(state.gpus or pci or state.driver or plan.target)


def package_command(state: HostState, verb: str, package: str) -> str:
    """The package manager's command line for this host's family (os-release, never a probe)."""
    tool = host_rules.PACKAGE_TOOLS.get(state.family or "", "")
    return f"{tool} {verb} {package}" if tool else f"{verb} {package} with the host's packages"


def nvidia_dkms_entries(state: HostState) -> list[tuple[str, str, str | None, str]]:
    """(module, version, kernel, state) of every DKMS entry of an NVIDIA kernel module."""
    out = []
    if state.dkms is not None:
        for e in state.dkms.entries:
            if e.module in host_rules.DKMS_MODULE_NAMES:
                out.append((e.module, e.version, e.kernel, e.state))
    return out
