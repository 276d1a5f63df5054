"""Host check of what the host's repositories install (`--repos`): the driver's kernel module
for every boot kernel, as the host's own dnf answered (pure)."""

from __future__ import annotations

import datetime as dt

from builder.facts import nvidia_packages as nv_pkgs
from builder.host.parsers import Available, rpm_q
from builder.host.shown import shown
from builder.judgement.finding import Finding
from builder.judgement.registry import check
from builder.judgement.severity import BLOCK, OK, SKIP, WARN
from builder.preflight.host_state import HostState, RepoAnswer
from builder.preflight.hostio import Output
from builder.preflight.model import UpgradePlan
from builder.preflight.repos_probe import DNF_TIMEOUT_S, asked_version

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
    out = state.out(ans.query)
    if out is None or not out.ok:
        why = _dnf_why(out, ans.timeout_s)
        return Finding(cid, WARN, f"cannot tell what installs: {why}", _REFRESH, SOURCES)
    flavours = _flavours(state, plan)
    fine: list[str] = []
    lacking: dict[str, str] = {}  # kernel -> its role
    for kernel, role in ans.kernels.items():
        if kernel in ans.refused:
            continue
        how = _installs(state, ans, kernel, flavours)
        if how is None:
            lacking[kernel] = role
        else:
            fine.append(f"{kernel} ({role}): {how}")
    found = _verdict(cid, state, ans, flavours, fine, lacking)
    if not ans.refused or found.severity is BLOCK:
        return found
    odd = ", ".join(f"{shown(k, 80)} ({ans.kernels[k]})" for k in ans.refused)
    return Finding(
        cid,
        WARN,
        f"cannot tell for {odd}: not an EL kernel release, so dnf was not asked about it; "
        + found.message,
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


def _flavours(state: HostState, plan: UpgradePlan) -> tuple[str, ...]:
    """The module flavour(s) whose packages count: the plan's, else what runs, else either."""
    flavour = plan.flavour(state) if plan.target else state.flavour
    return (flavour,) if flavour in nv_pkgs.DKMS_KMOD else tuple(nv_pkgs.DKMS_KMOD)


def _offered(ans: RepoAnswer, name: str, version: str | None = None) -> Available | None:
    for a in ans.available:
        if a.name == name and (version is None or a.version == version):
            return a
    return None


def _devel(state: HostState, ans: RepoAnswer, kernel: str) -> str | None:
    """kernel-devel for `kernel`: installed, or offered by a repository."""
    installed = state.rpm.installed.get(nv_pkgs.KERNEL_DEVEL, ()) if state.rpm else ()
    if kernel in installed:
        return f"{nv_pkgs.KERNEL_DEVEL}-{kernel} (installed)"
    for a in ans.available:
        if a.name == nv_pkgs.KERNEL_DEVEL and f"{a.version}-{a.release}.{a.arch}" == kernel:
            return f"{a.nevra} ({a.repo})"
    return None


def _installs(
    state: HostState, ans: RepoAnswer, kernel: str, flavours: tuple[str, ...]
) -> str | None:
    """What would install the module for `kernel`, in words; None: nothing."""
    base = nv_pkgs.kernel_base(kernel) or ""
    for flavour in flavours:
        name = nv_pkgs.PRECOMPILED_KMOD[flavour].format(driver=ans.version, kernel=base)
        kmod = _offered(ans, name, ans.version)
        if kmod is not None:
            return f"{kmod.nevra} ({kmod.repo}, precompiled)"
        if any(pkg == name for pkg, _, _ in state.kmods):
            return f"{name} (precompiled, installed)"
    dkms = _offered(ans, nv_pkgs.DKMS_PACKAGE)
    devel = _devel(state, ans, kernel)
    installed_dkms = bool(state.rpm and state.rpm.installed.get(nv_pkgs.DKMS_PACKAGE))
    for flavour in flavours:
        name = nv_pkgs.DKMS_KMOD[flavour]
        kmod = _offered(ans, name, ans.version)
        how = f"{kmod.nevra} ({kmod.repo})" if kmod else None
        if how is None and _installed(state, name, ans.version):
            how = f"{name}-{ans.version} (installed)"
        if how is not None and devel is not None and (dkms is not None or installed_dkms):
            with_dkms = f"{dkms.nevra} ({dkms.repo})" if dkms else "dkms (installed)"
            return f"DKMS: {how} + {with_dkms} + {devel}"
    return None


def _installed(state: HostState, name: str, version: str) -> bool:
    """Is `name` installed at `version` (rpm -qa 'kmod-nvidia*': the DKMS kmods too)?"""
    out = state.out("rpm-kmods")
    if out is None or not out.ok:
        return False
    return any(v.startswith(f"{version}-") for v in rpm_q(out.stdout).installed.get(name, ()))


def _driver_there(state: HostState, ans: RepoAnswer) -> str | None:
    """The driver package of the asked version: offered, or already installed."""
    offered = _offered(ans, nv_pkgs.DRIVER_PACKAGE, ans.version)
    if offered is not None:
        return f"{offered.nevra} ({offered.repo})"
    if str(state.userspace_driver) == ans.version:
        return f"{nv_pkgs.DRIVER_PACKAGE}-{ans.version} (installed)"
    return None


def _verdict(
    cid: str,
    state: HostState,
    ans: RepoAnswer,
    flavours: tuple[str, ...],
    fine: list[str],
    lacking: dict[str, str],
) -> Finding:
    cache = (
        " (dnf answered from its metadata cache: `dnf makecache` refreshes it)"
        if ans.cache == "cache"
        else " (dnf refreshed its metadata cache to answer)"
    )
    driver = _driver_there(state, ans)
    streams = _streams(ans)
    notes = "; ".join(fine) + (f"; {streams}" if streams else "")
    nxt = [k for k, role in lacking.items() if "next boot" in role]
    if nxt or driver is None:
        what = (
            [f"{nv_pkgs.DRIVER_PACKAGE}-{ans.version} is in none of the host's repositories"]
            if driver is None
            else []
        )
        what += [_lacks(state, ans, k, lacking[k], flavours) for k in nxt]
        return Finding(
            cid,
            BLOCK,
            "breaks: " + "; ".join(what) + (f" (other: {notes})" if notes else "") + cache,
            _fix(state, ans, nxt, flavours, lacking),
            SOURCES,
        )
    if lacking:
        what = [_lacks(state, ans, k, role, flavours) for k, role in lacking.items()]
        return Finding(
            cid,
            WARN,
            "; ".join(what) + f" (the next boot is covered: {notes})" + cache,
            _fix(state, ans, list(lacking), flavours, lacking),
            SOURCES,
        )
    return Finding(cid, OK, f"{driver}; {notes}{cache}", "", SOURCES)


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
    state: HostState, ans: RepoAnswer, kernel: str, role: str, flavours: tuple[str, ...]
) -> str:
    """Why nothing installs the module for `kernel`, naming the packages."""
    base = nv_pkgs.kernel_base(kernel) or ""
    kmods = " or ".join(
        nv_pkgs.PRECOMPILED_KMOD[f].format(driver=ans.version, kernel=base) for f in flavours
    )
    missing = []
    if all(_offered(ans, nv_pkgs.DKMS_KMOD[f], ans.version) is None for f in flavours):
        missing.append(" or ".join(f"{nv_pkgs.DKMS_KMOD[f]}-{ans.version}" for f in flavours))
    if _devel(state, ans, kernel) is None:
        missing.append(f"{nv_pkgs.KERNEL_DEVEL}-{kernel}")
    if _offered(ans, nv_pkgs.DKMS_PACKAGE) is None and not (
        state.rpm and state.rpm.installed.get(nv_pkgs.DKMS_PACKAGE)
    ):
        missing.append(f"{nv_pkgs.DKMS_PACKAGE} (EPEL)")
    return (
        f"nothing installs the nvidia {ans.version} module for {kernel} ({role}): no {kmods} "
        f"in the host's repositories, and DKMS lacks {', '.join(missing) or 'nothing'}"
    )


def _fix(
    state: HostState,
    ans: RepoAnswer,
    kernels: list[str],
    flavours: tuple[str, ...],
    lacking: dict[str, str],
) -> str:
    branch = ans.version.split(".")[0]
    stream = f"{branch}-open" if flavours == ("open",) else f"{branch}-dkms"
    need = [f"{nv_pkgs.KERNEL_DEVEL}-{k}" for k in kernels if _devel(state, ans, k) is None]
    if _offered(ans, nv_pkgs.DKMS_PACKAGE) is None and not (
        state.rpm and state.rpm.installed.get(nv_pkgs.DKMS_PACKAGE)
    ):
        need.append("dkms (EPEL)")
    parts = [
        "wait for NVIDIA to publish the precompiled kmod for that kernel (they follow an errata "
        "kernel by days)",
        "or build it with DKMS: "
        + (f"dnf install {' '.join(need)}, then " if need else "")
        + f"dnf module switch-to {nv_pkgs.MODULE}:{stream}",
    ]
    running = state.kernel
    if running and running not in lacking and running in ans.kernels:
        parts.append(
            f"or keep booting the current kernel: grubby --set-default /boot/vmlinuz-{running}"
        )
    return "; ".join(parts)
