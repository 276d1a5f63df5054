"""Host checks of the OS and its kernels (pure): is the release supported, can DKMS build the
nvidia module for every kernel that may boot, and is one built for the target driver."""

from __future__ import annotations

import datetime as dt

from builder.facts import host as host_rules
from builder.facts.oses import EOL_WARN_DAYS
from builder.facts.sources import Source
from builder.judgement.finding import Finding
from builder.judgement.registry import check
from builder.judgement.severity import BLOCK, OK, SKIP, WARN
from builder.preflight.checks.common import (
    has_nvidia,
    nvidia_dkms_entries,
    package_command,
)
from builder.preflight.host_state import HostState
from builder.preflight.model import UpgradePlan


@check("host.os", "host", reads=("os",))
def os_support(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Is the OS one the rules know, EL-family, and supported (not near its end of life)?"""
    if state.os is None:
        out = state.out("os-release")
        why = out.why() if out is not None else "not read"
        return Finding(
            cid,
            WARN,
            f"could not read /etc/os-release: {why}",
            "check the host is Linux and /etc/os-release is readable",
        )
    known = host_rules.host_os_lifecycle(state.os.id, state.os.version_id)
    if known is None:
        names = ", ".join(o.name for o in host_rules.HOST_OSES)
        return Finding(
            cid,
            WARN,
            f"{state.os.pretty_name}: not an OS the rules know, so its "
            f"end of life is unknown (known: {names})",
            "add it to builder/facts/host.py HOST_OSES with its source",
        )
    src = (known.source,)
    left = (known.eol - today).days
    if known.family not in host_rules.RPM_FAMILIES:
        return Finding(
            cid,
            WARN,
            f"{state.os.pretty_name} is not a RHEL-family host: the kernel-"
            "devel, DKMS and driver-stream checks assume EL9 (rpm, dnf)",
            "run preflight on the EL hosts that will take the driver",
            src,
        )
    if left < 0:
        return Finding(
            cid,
            WARN,
            f"{known.name} reached end of life on {known.eol}",
            "move the host to a supported release before changing its driver",
            src,
        )
    if left <= EOL_WARN_DAYS:
        return Finding(
            cid,
            WARN,
            f"{known.name} reaches end of life on {known.eol} ({left} days)",
            "plan the OS upgrade; NVIDIA drops driver streams for EOL releases",
            src,
        )
    return Finding(
        cid, OK, f"{state.os.pretty_name} ({known.family}), supported until {known.eol}", "", src
    )


def _not_el(state: HostState) -> str:
    """Why a host is not judged as EL, from its os-release."""
    if state.os is None:
        return "the OS is unknown (no /etc/os-release)"
    like = f", ID_LIKE={state.os.id_like}" if state.os.id_like else ""
    return f"not an EL host (os-release ID={state.os.id}{like})"


def _installed_kernels(state: HostState) -> list[str]:
    rpm = state.rpm
    kernels = list(rpm.installed.get("kernel-core", ())) if rpm else []
    for k in (state.kernel, state.default_kernel):
        if k and k not in kernels:
            kernels.append(k)
    return kernels


def _boot_kernels(state: HostState) -> list[str]:
    return list(dict.fromkeys(k for k in (state.kernel, state.default_kernel) if k))


@check("kernel.devel", "host", reads=("os", "packages"))
def kernel_devel(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Has every kernel that may boot its kernel-devel, so DKMS can build the module?"""
    src = (host_rules.KERNEL_DEVEL_SOURCE,)
    if state.family != "el":
        return Finding(cid, SKIP, f"{_not_el(state)}: kernel-devel is checked on EL hosts only")
    if state.rpm is None:
        out = state.out("rpm")
        why = out.why() if out is not None else "not asked"
        return Finding(
            cid, WARN, f"an EL host where rpm gave nothing ({why})", "check the rpm database", src
        )
    devel = set(state.rpm.installed.get("kernel-devel", ()))
    kernels = _installed_kernels(state)
    boot = _boot_kernels(state)
    lacking = [k for k in kernels if k not in devel]
    boot_lacking = [k for k in lacking if k in boot]
    headers = state.rpm.installed.get("kernel-headers", ())
    desc = f"kernels {', '.join(kernels)}; kernel-devel for {', '.join(sorted(devel)) or 'none'}"
    if headers:
        desc += f"; kernel-headers {', '.join(headers)}"
    if boot_lacking and has_nvidia(state, plan):
        running = state.kernel in boot_lacking
        fix = (
            "dnf install kernel-devel-matched kernel-headers"
            if running
            else " ".join(["dnf install", *(f"kernel-devel-{k}" for k in boot_lacking)])
        )
        role = ", ".join(
            f"{k} ({'running' if k == state.kernel else 'default for the next boot'})"
            for k in boot_lacking
        )
        return Finding(
            cid,
            BLOCK,
            f"no kernel-devel for {role}: DKMS cannot build the nvidia module for it ({desc})",
            fix,
            src,
        )
    if lacking:
        return Finding(
            cid,
            WARN,
            f"no kernel-devel for installed kernel(s) {', '.join(lacking)} "
            f"(not booted by default): booting one of them leaves no nvidia module ({desc})",
            " ".join(["dnf install", *(f"kernel-devel-{k}" for k in lacking)])
            + " (or remove the old kernels)",
            src,
        )
    return Finding(cid, OK, desc, "", src)


def _covered(state: HostState, version: str, kernel: str) -> str | None:
    """How the nvidia module `version` exists for `kernel` (DKMS or a kmod package), or None."""
    for module, ver, k, st in nvidia_dkms_entries(state):
        if ver == version and k == kernel and st in ("installed", "installed-weak"):
            return f"{module}/{ver} {st} (DKMS)"
    for pkg, drv, prefix in state.kmods:
        if drv == version and kernel.startswith(prefix + "."):
            return f"{pkg} (precompiled)"
    return None


def _headers(state: HostState) -> str:
    """The package DKMS needs for a kernel on this host's family."""
    pkg = host_rules.KERNEL_HEADERS_PACKAGE.get(state.family or "", "")
    return pkg.format(kernel="KERNEL") if pkg else "the kernel headers"


def _dkms_used(state: HostState) -> bool:
    """Does DKMS hold an NVIDIA module here (else the modules come precompiled)?"""
    return bool(nvidia_dkms_entries(state))


@check("dkms.nvidia", "host", reads=("packages", "dkms"))
def dkms_modules(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Is there an nvidia module (DKMS or precompiled) of the driver for every boot kernel?"""
    src = (host_rules.DKMS_STATUS_SOURCE, host_rules.DKMS_MODULE_SOURCE)
    out = state.out("dkms")
    version = _module_version(state, plan)
    if version is None:
        return Finding(
            cid,
            SKIP,
            "no NVIDIA driver loaded and no --target-driver: no module version to look for",
            "",
            src,
        )
    if out is not None and not out.ok and not state.kmods:
        sev = WARN if out.missing else BLOCK
        return Finding(
            cid,
            sev,
            f"{out.why()}: cannot tell which kernels have an nvidia module"
            + (" and NVIDIA's DKMS streams need dkms (EPEL)" if out.missing else ""),
            package_command(state, "install", "dkms")
            + (
                " (from EPEL), or use NVIDIA's precompiled kmod streams"
                if state.family == "el"
                else ""
            ),
            src,
        )
    dkms_ok = out is not None and out.ok
    problems: list[str] = []
    notes: list[str] = []
    for kernel in _installed_kernels(state):
        problem, text = _kernel_module(state, plan, version, kernel, dkms_ok)
        (problems if problem else notes).append(text)
    return _dkms_verdict(cid, state, problems, notes, src)


def _module_version(state: HostState, plan: UpgradePlan) -> str | None:
    """The nvidia module version every boot kernel needs: the target's, else the driver's after
    a pending reboot, else the last one DKMS installed for the running kernel."""
    built = [
        v for _, v, k, st in nvidia_dkms_entries(state) if k == state.kernel and st == "installed"
    ]
    nxt = state.next_driver
    return (
        str(plan.target)
        if plan.target
        else (str(nxt) if nxt else None) or (built[-1] if built else None)
    )


def _kernel_module(
    state: HostState, plan: UpgradePlan, version: str, kernel: str, dkms_ok: bool
) -> tuple[bool, str]:
    """One installed kernel: (is it a problem, what to say) about its nvidia `version` module."""
    devel = set(state.rpm.installed.get("kernel-devel", ())) if state.rpm else set()
    how = _covered(state, version, kernel)
    role = (
        "running"
        if kernel == state.kernel
        else ("next boot" if kernel == state.default_kernel else "installed")
    )
    if how is not None:
        return False, f"{kernel} ({role}): {how}"
    if plan.target is not None and kernel in devel and dkms_ok:
        return False, f"{kernel} ({role}): DKMS builds {version} at install (kernel-devel present)"
    if plan.target is not None and state.kmods and not _dkms_used(state):
        return False, (
            f"{kernel} ({role}): precompiled modules: the upgrade installs the "
            f"kmod-nvidia package of {version} for it (its availability for this kernel is "
            "the repository's: driver.repos checks it with --repos)"
        )
    if plan.target is not None and state.family != "el" and dkms_ok:
        headers = host_rules.KERNEL_HEADERS_PACKAGE.get(state.family or "", "")
        return False, (
            f"{kernel} ({role}): DKMS builds {version} at install if "
            f"{headers.format(kernel=kernel) or 'its kernel headers'} is installed (not "
            "checked on this OS)"
        )
    if kernel in _boot_kernels(state):
        lacks = " and no kernel-devel to build one" if state.family == "el" else ""
        return True, (
            f"{kernel} ({role}) has no nvidia {version} module" + ("" if kernel in devel else lacks)
        )
    return False, f"{kernel} ({role}): no nvidia {version} module (fallback kernel)"


def _dkms_verdict(
    cid: str, state: HostState, problems: list[str], notes: list[str], src: tuple[Source, ...]
) -> Finding:
    """Kernels without a module block; unfinished DKMS entries warn; else the notes."""
    broken = [
        f"{m}/{v}: {st}"
        for m, v, k, st in nvidia_dkms_entries(state)
        if st in ("broken", "built", "added")
    ]
    if problems:
        return Finding(
            cid,
            BLOCK,
            "; ".join(problems) + (f" (other: {'; '.join(notes)})" if notes else ""),
            f"install {_headers(state)} for that kernel so DKMS builds the module (dkms "
            "autoinstall -k KERNEL)"
            + (", or the precompiled kmod for it" if state.family == "el" else "")
            + "; a reboot into it otherwise leaves the GPUs without a driver",
            src,
        )
    if broken:
        return Finding(
            cid,
            WARN,
            f"DKMS holds unfinished nvidia entries: {', '.join(broken)}; " + "; ".join(notes),
            "dkms remove MODULE/VERSION --all for stale entries, or dkms install them",
            src,
        )
    if not notes:
        return Finding(cid, SKIP, "no installed kernel found to check", "", src)
    return Finding(cid, OK, "; ".join(notes), "", src)
