"""`--repos`: which packages would install the driver's kernel module for a kernel, read off
what dnf offered and what is installed (pure). The probe resolves that set with dnf; the check
(checks/repos.py) words the verdict."""

from __future__ import annotations

from dataclasses import dataclass

from builder.facts import nvidia_packages as nv_pkgs
from builder.host.parsers import Available, rpm_q
from builder.preflight.host_state import HostState, RepoAnswer
from builder.preflight.model import UpgradePlan

# Seconds dnf may take (at least; --timeout when larger): a metadata refresh of four
# repositories on a slow mirror takes tens of seconds, more than the 20 s of other probes.
DNF_TIMEOUT_S = 120


def asked_version(state: HostState, plan: UpgradePlan) -> str | None:
    """The driver whose packages are asked for: the target, else what the next boot runs."""
    version = plan.target or state.next_driver
    return str(version) if version is not None else None


@dataclass(frozen=True)
class Route:
    """How the module for one kernel installs: in words, and the package specs dnf would be
    asked to install (what is installed already is not among them)."""

    words: str
    install: tuple[str, ...]


def flavours(state: HostState, plan: UpgradePlan) -> tuple[str, ...]:
    """The module flavour(s) whose packages count: the plan's, else what runs, else either."""
    flavour = plan.flavour(state) if plan.target else state.flavour
    return (flavour,) if flavour in nv_pkgs.DKMS_KMOD else tuple(nv_pkgs.DKMS_KMOD)


def offered(ans: RepoAnswer, name: str, version: str | None = None) -> Available | None:
    for a in ans.available:
        if a.name == name and (version is None or a.version == version):
            return a
    return None


def _said(a: Available) -> str:
    return f"{a.nevra} ({a.repo})"


def devel(state: HostState, ans: RepoAnswer, kernel: str) -> tuple[str, str | None] | None:
    """kernel-devel for `kernel`: (words, spec to install or None: installed), or None."""
    installed = state.rpm.installed.get(nv_pkgs.KERNEL_DEVEL, ()) if state.rpm else ()
    if kernel in installed:
        return f"{nv_pkgs.KERNEL_DEVEL}-{kernel} (installed)", None
    for a in ans.available:
        if a.name == nv_pkgs.KERNEL_DEVEL and f"{a.version}-{a.release}.{a.arch}" == kernel:
            return _said(a), f"{nv_pkgs.KERNEL_DEVEL}-{kernel}"
    return None


def dkms_there(state: HostState, ans: RepoAnswer) -> tuple[str, str | None] | None:
    """dkms (EPEL): (words, spec or None: installed), or None."""
    if state.rpm and state.rpm.installed.get(nv_pkgs.DKMS_PACKAGE):
        return "dkms (installed)", None
    found = offered(ans, nv_pkgs.DKMS_PACKAGE)
    return (_said(found), nv_pkgs.DKMS_PACKAGE) if found else None


def installed(state: HostState, name: str, version: str) -> bool:
    """Is `name` installed at `version` (rpm -qa 'kmod-nvidia*': the DKMS kmods too)?"""
    out = state.out("rpm-kmods")
    if out is None or not out.ok:
        return False
    return any(v.startswith(f"{version}-") for v in rpm_q(out.stdout).installed.get(name, ()))


def driver_there(state: HostState, ans: RepoAnswer) -> tuple[str, str | None] | None:
    """The driver package of the asked version: (words, spec or None: installed), or None."""
    found = offered(ans, nv_pkgs.DRIVER_PACKAGE, ans.version)
    if str(state.userspace_driver) == ans.version:
        return f"{nv_pkgs.DRIVER_PACKAGE}-{ans.version} (installed)", None
    if found is not None:
        return _said(found), f"{nv_pkgs.DRIVER_PACKAGE}-{ans.version}"
    return None


def route(state: HostState, ans: RepoAnswer, kernel: str, kinds: tuple[str, ...]) -> Route | None:
    """What would install the module for `kernel`: its precompiled kmod, else DKMS (the DKMS
    kmod + dkms + that kernel's kernel-devel); None: nothing."""
    base = nv_pkgs.kernel_base(kernel) or ""
    for flavour in kinds:
        name = nv_pkgs.PRECOMPILED_KMOD[flavour].format(driver=ans.version, kernel=base)
        if any(pkg == name for pkg, _, _ in state.kmods):
            return Route(f"{name} (precompiled, installed)", ())
        kmod = offered(ans, name, ans.version)
        if kmod is not None:
            return Route(f"{kmod.nevra} ({kmod.repo}, precompiled)", (name,))
    dev, dkms = devel(state, ans, kernel), dkms_there(state, ans)
    for flavour in kinds:
        name = nv_pkgs.DKMS_KMOD[flavour]
        kmod = offered(ans, name, ans.version)
        part: tuple[str, str | None] | None = (
            (_said(kmod), f"{name}-{ans.version}") if kmod else None
        )
        if part is None and installed(state, name, ans.version):
            part = (f"{name}-{ans.version} (installed)", None)
        if part is not None and dev is not None and dkms is not None:
            parts = (part, dkms, dev)
            return Route(
                "DKMS: " + " + ".join(w for w, _ in parts),
                tuple(spec for _, spec in parts if spec is not None),
            )
    return None
