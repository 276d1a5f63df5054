"""Host check of what the host's repositories install (`--repos`): the driver's kernel module
for every boot kernel, as the host's own dnf answered (pure)."""

from __future__ import annotations

import datetime as dt

from builder.facts import nvidia_packages as nv_pkgs
from builder.host.parsers import DnfResolution, dnf_assumeno
from builder.host.shown import shown
from builder.judgement.finding import Finding
from builder.judgement.registry import check
from builder.judgement.severity import BLOCK, OK, SKIP, WARN
from builder.preflight.host_state import HostState, RepoAnswer
from builder.preflight.hostio import Output
from builder.preflight.model import UpgradePlan
from builder.preflight.repos_route import (
    DNF_TIMEOUT_S,
    asked_version,
    devel,
    dkms_there,
    driver_there,
    flavours,
    offered,
    route,
)

SOURCES = (
    nv_pkgs.PRECOMPILED_KMOD_SOURCE,
    nv_pkgs.DKMS_KMOD_SOURCE,
    nv_pkgs.STREAMS_SOURCE,
    nv_pkgs.DRIVER_PACKAGE_SOURCE,
)
_REFRESH = "refresh dnf's cache (`dnf makecache`) or fix the host's repositories, then run again"


@check("driver.repos", "host", reads=("packages", "repos"))
def driver_repos(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Does anything in the host's repositories install the driver's module for the kernel
    the next boot runs (a precompiled kmod for it, or DKMS + its kernel-devel)?"""
    ans = state.repos
    if ans is None:
        return Finding(cid, SKIP, _not_asked(state, plan), "", SOURCES)
    if ans.version != asked_version(state, plan):  # the now verdict of a host with a target
        return Finding(cid, SKIP, f"dnf was asked about {ans.version}: see the plan", "", SOURCES)
    out = state.out(ans.query) if ans.query else None
    if out is None or not out.ok:
        why = ans.note or _dnf_why(out, ans.timeout_s)
        return Finding(cid, WARN, f"cannot tell what installs: {why}", _REFRESH, SOURCES)
    kinds = flavours(state, plan)
    fine: list[str] = []
    lacking: dict[str, str] = {}  # kernel -> why nothing installs its module
    unresolved: list[str] = []
    for kernel, role in ans.kernels.items():
        if kernel in ans.refused:
            continue
        way = route(state, ans, kernel, kinds)
        said = _resolution(state, ans, kernel)
        if way is None:
            lacking[kernel] = _lacks(state, ans, kernel, role, kinds)
        elif said.status == "fails":
            lacking[kernel] = (
                f"dnf cannot install {way.words} with the driver for {kernel} ({role}): "
                f"{shown(said.detail, 300)}"
            )
        else:
            fine.append(f"{kernel} ({role}): {way.words}")
            if said.status != "resolves":
                unresolved.append(said.detail)
    found = _verdict(cid, state, ans, kinds, fine, lacking, unresolved)
    if not ans.refused or found.severity is BLOCK:
        return found
    odd = ", ".join(f"{shown(k, 80)} ({ans.kernels[k]})" for k in ans.refused)
    return Finding(
        cid,
        WARN,
        f"cannot tell for {odd}: not a plain EL kernel release (a variant such as +debug or "
        "-rt has other package names), so dnf was not asked about it; " + found.message,
        "check the kernel release (`uname -r`, `grubby --default-kernel`) by hand",
        SOURCES,
    )


def _not_asked(state: HostState, plan: UpgradePlan) -> str:
    if not plan.repos:
        return "not asked: --repos asks the host's dnf what installs the driver's kernel module"
    if state.family != "el":
        return "not an EL host: --repos asks dnf, which installs NVIDIA's EL packages"
    if asked_version(state, plan) is None:
        return "no driver loaded or installed and no --target-driver: no version to ask for"
    return "dnf was not asked (reading the host failed before it)"


def _dnf_why(out: Output | None, seconds: int) -> str:
    if out is None:
        return "dnf was not asked"
    if out.missing:
        return (
            "`dnf` is not installed (command not found; a record made without --repos has no "
            "dnf answers)"
        )
    if out.timed_out:
        return f"`dnf` timed out after {seconds or DNF_TIMEOUT_S} s"
    return out.why()


def _resolution(state: HostState, ans: RepoAnswer, kernel: str) -> DnfResolution:
    """What `dnf install --assumeno` said of this kernel's packages (resolves when nothing
    needed installing)."""
    key = ans.resolved.get(kernel)
    out = state.out(key) if key else None
    if key is None:
        return DnfResolution("resolves")
    if out is None:
        return DnfResolution("unknown", ans.note or "the transaction was not resolved")
    if out.timed_out:
        took = f"`dnf install --assumeno` timed out after {ans.timeout_s} s"
        return DnfResolution("timeout", took)
    return dnf_assumeno(out.rc, out.stdout + out.stderr)


def _verdict(
    cid: str,
    state: HostState,
    ans: RepoAnswer,
    kinds: tuple[str, ...],
    fine: list[str],
    lacking: dict[str, str],
    unresolved: list[str],
) -> Finding:
    cache = (
        " (dnf answered from its metadata cache: `dnf makecache` refreshes it)"
        if ans.cache == "cache"
        else " (dnf refreshed its metadata cache to answer)"
    )
    if ans.note:
        unresolved.append(ans.note)
    if unresolved:
        cache += f" (not resolved as a transaction: {unresolved[0]})"
    timed_out = any("timed out" in u or "not started" in u for u in unresolved)
    driver = driver_there(state, ans)
    streams = _streams(ans)
    nxt = [k for k in lacking if "next boot" in ans.kernels[k]]
    others = [why for k, why in lacking.items() if k not in nxt]
    notes = "; ".join([*fine, *([streams] if streams else [])])
    if nxt or driver is None:
        what = (
            [f"{nv_pkgs.DRIVER_PACKAGE}-{ans.version} is in none of the host's repositories"]
            if driver is None
            else []
        )
        what += [lacking[k] for k in nxt]
        return Finding(
            cid,
            BLOCK,
            "breaks: "
            + "; ".join([*what, *others])
            + (f" (other: {notes})" if notes else "")
            + cache,
            _fix(state, ans, nxt, kinds, lacking),
            SOURCES,
        )
    if lacking:
        return Finding(
            cid,
            WARN,
            "; ".join(lacking.values()) + f" (the next boot is covered: {notes})" + cache,
            _fix(state, ans, list(lacking), kinds, lacking),
            SOURCES,
        )
    if timed_out:  # every name is there, but dnf did not finish resolving them
        return Finding(cid, WARN, f"{driver[0]}; {notes}{cache}", _REFRESH, SOURCES)
    return Finding(cid, OK, f"{driver[0]}; {notes}{cache}", "", SOURCES)


def _streams(ans: RepoAnswer) -> str:
    """What the module streams say about the branch (empty: not listed)."""
    if ans.streams is None:
        return ""
    if not ans.streams:
        return f"no {nv_pkgs.MODULE} module streams (the packages are not modular here)"
    branch = int(ans.version.split(".")[0])
    have = [s for s in nv_pkgs.module_streams(branch) if s in ans.streams]
    if not have:
        return f"no {nv_pkgs.MODULE}:{branch}* stream (streams: {', '.join(ans.streams[:8])})"
    return "module streams " + ", ".join(f"{nv_pkgs.MODULE}:{s}" for s in have)


def _lacks(
    state: HostState, ans: RepoAnswer, kernel: str, role: str, kinds: tuple[str, ...]
) -> str:
    """Why nothing installs the module for `kernel`, naming the packages."""
    base = nv_pkgs.kernel_base(kernel) or ""
    kmods = " or ".join(
        nv_pkgs.PRECOMPILED_KMOD[f].format(driver=ans.version, kernel=base) for f in kinds
    )
    missing = []
    if all(offered(ans, nv_pkgs.DKMS_KMOD[f], ans.version) is None for f in kinds):
        missing.append(" or ".join(f"{nv_pkgs.DKMS_KMOD[f]}-{ans.version}" for f in kinds))
    if devel(state, ans, kernel) is None:
        missing.append(f"{nv_pkgs.KERNEL_DEVEL}-{kernel}")
    if dkms_there(state, ans) is None:
        missing.append(f"{nv_pkgs.DKMS_PACKAGE} (EPEL)")
    return (
        f"nothing installs the nvidia {ans.version} module for {kernel} ({role}): no {kmods} "
        f"in the host's repositories, and DKMS lacks {', '.join(missing) or 'nothing'}"
    )


def _fix(
    state: HostState,
    ans: RepoAnswer,
    kernels: list[str],
    kinds: tuple[str, ...],
    lacking: dict[str, str],
) -> str:
    branch = ans.version.split(".")[0]
    stream = f"{branch}-open" if kinds == ("open",) else f"{branch}-dkms"
    need = [f"{nv_pkgs.KERNEL_DEVEL}-{k}" for k in kernels if devel(state, ans, k) is None]
    if dkms_there(state, ans) is None:
        need.append("dkms (EPEL)")
    parts = [
        "wait for NVIDIA to publish the precompiled kmod for that kernel (they follow an errata "
        "kernel by days)",
        "or build it with DKMS: "
        + (f"dnf install {' '.join(need)}, then " if need else "")
        + f"dnf module switch-to {nv_pkgs.MODULE}:{stream}",
    ]
    if any(k.startswith("dnf cannot install") for k in lacking.values()):
        parts.insert(0, "resolve what dnf names (a missing dependency, an exclude or a pin)")
    running = state.kernel
    if running and running not in lacking and running in ans.kernels:
        parts.append(
            f"or keep booting the current kernel: grubby --set-default /boot/vmlinuz-{running}"
        )
    return "; ".join(parts)
