"""The host checks (pure): HostState + the plan (target driver) -> one Check per id.

Every number a check compares against lives in builder.facts; this module only applies it.
The list of ids, what each looks at and its sources is in docs/preflight.md.
"""

from __future__ import annotations

import datetime as dt
import os
from collections import Counter
from collections.abc import Callable

from packaging.version import InvalidVersion, Version

from builder.facts import drivers as driver_rules
from builder.facts import gpus as gpu_rules
from builder.facts import host as host_rules
from builder.facts.driver_version import DriverVersion
from builder.facts.oses import EOL_WARN_DAYS
from builder.facts.sources import CUDA_GPUS, DATACENTER_DRIVER_LIFECYCLE
from builder.preflight import admin_checks
from builder.preflight.gather import HostGpu, HostState
from builder.preflight.model import BLOCK, OK, SKIP, WARN, Check, Plan, Severity


def _version(text: str | None) -> Version | None:
    if not text:
        return None
    try:
        return Version(text.split("-")[0].split("~")[0])
    except InvalidVersion:
        return None


def _gpu_summary(gpus: list[HostGpu]) -> str:
    counts = Counter(f"{g.name} ({g.cc_text})" for g in gpus)
    return ", ".join(f"{n}x {name}" if n > 1 else name for name, n in counts.items())


def _has_nvidia(state: HostState, plan: Plan) -> bool:
    """Is there anything NVIDIA here to judge (a GPU, a driver, or a planned install)?"""
    pci = state.pci.gpus if state.pci else ()
    return bool(state.gpus or pci or state.driver or plan.target)


# --- OS and kernels --------------------------------------------------------------------------


def host_os(state: HostState, plan: Plan, today: dt.date) -> Check:
    cid = "host.os"
    if state.os is None:
        out = state.out("os-release")
        why = out.why() if out is not None else "not read"
        return Check(
            cid,
            WARN,
            f"could not read /etc/os-release: {why}",
            "check the host is Linux and /etc/os-release is readable",
        )
    known = host_rules.host_os_lifecycle(state.os.id, state.os.version_id)
    if known is None:
        names = ", ".join(o.name for o in host_rules.HOST_OSES)
        return Check(
            cid,
            WARN,
            f"{state.os.pretty_name}: not an OS the rules know, so its "
            f"end of life is unknown (known: {names})",
            "add it to builder/facts/host.py HOST_OSES with its source",
        )
    src = (known.source,)
    left = (known.eol - today).days
    if known.family not in host_rules.RPM_FAMILIES:
        return Check(
            cid,
            WARN,
            f"{state.os.pretty_name} is not a RHEL-family host: the kernel-"
            "devel, DKMS and driver-stream checks assume EL9 (rpm, dnf)",
            "run preflight on the EL hosts that will take the driver",
            src,
        )
    if left < 0:
        return Check(
            cid,
            WARN,
            f"{known.name} reached end of life on {known.eol}",
            "move the host to a supported release before changing its driver",
            src,
        )
    if left <= EOL_WARN_DAYS:
        return Check(
            cid,
            WARN,
            f"{known.name} reaches end of life on {known.eol} ({left} days)",
            "plan the OS upgrade; NVIDIA drops driver streams for EOL releases",
            src,
        )
    return Check(
        cid, OK, f"{state.os.pretty_name} ({known.family}), supported until {known.eol}", "", src
    )


def _not_el(state: HostState) -> str:
    """Why a host is not judged as EL, from its os-release."""
    if state.os is None:
        return "the OS is unknown (no /etc/os-release)"
    like = f", ID_LIKE={state.os.id_like}" if state.os.id_like else ""
    return f"not an EL host (os-release ID={state.os.id}{like})"


def _pkg(state: HostState, verb: str, package: str) -> str:
    """The package manager's command line for this host's family (os-release, never a probe)."""
    tool = host_rules.PACKAGE_TOOLS.get(state.family or "", "")
    return f"{tool} {verb} {package}" if tool else f"{verb} {package} with the host's packages"


def _installed_kernels(state: HostState) -> list[str]:
    rpm = state.rpm
    kernels = list(rpm.installed.get("kernel-core", ())) if rpm else []
    for k in (state.kernel, state.default_kernel):
        if k and k not in kernels:
            kernels.append(k)
    return kernels


def _boot_kernels(state: HostState) -> list[str]:
    return list(dict.fromkeys(k for k in (state.kernel, state.default_kernel) if k))


def kernel_devel(state: HostState, plan: Plan, today: dt.date) -> Check:
    cid, src = "kernel.devel", (host_rules.KERNEL_DEVEL_SOURCE,)
    if state.family != "el":
        return Check(cid, SKIP, f"{_not_el(state)}: kernel-devel is checked on EL hosts only")
    if state.rpm is None:
        out = state.out("rpm")
        why = out.why() if out is not None else "not asked"
        return Check(
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
    if boot_lacking and _has_nvidia(state, plan):
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
        return Check(
            cid,
            BLOCK,
            f"no kernel-devel for {role}: DKMS cannot build the nvidia module for it ({desc})",
            fix,
            src,
        )
    if lacking:
        return Check(
            cid,
            WARN,
            f"no kernel-devel for installed kernel(s) {', '.join(lacking)} "
            f"(not booted by default): booting one of them leaves no nvidia module ({desc})",
            " ".join(["dnf install", *(f"kernel-devel-{k}" for k in lacking)])
            + " (or remove the old kernels)",
            src,
        )
    return Check(cid, OK, desc, "", src)


def _nvidia_entries(state: HostState) -> list[tuple[str, str, str | None, str]]:
    """(version, kernel, state) of DKMS nvidia modules and precompiled kmods."""
    out = []
    if state.dkms is not None:
        for e in state.dkms.entries:
            if e.module in host_rules.DKMS_MODULE_NAMES:
                out.append((e.module, e.version, e.kernel, e.state))
    return out


def _covered(state: HostState, version: str, kernel: str) -> str | None:
    """How the nvidia module `version` exists for `kernel` (DKMS or a kmod package), or None."""
    for module, ver, k, st in _nvidia_entries(state):
        if ver == version and k == kernel and st in ("installed", "installed-weak"):
            return f"{module}/{ver} {st} (DKMS)"
    for pkg, drv, prefix in state.kmods:
        if drv == version and kernel.startswith(prefix + "."):
            return f"{pkg} (precompiled)"
    return None


def dkms_modules(state: HostState, plan: Plan, today: dt.date) -> Check:
    cid, src = "dkms.nvidia", (host_rules.DKMS_STATUS_SOURCE, host_rules.DKMS_MODULE_SOURCE)
    out = state.out("dkms")
    built = [v for _, v, k, st in _nvidia_entries(state) if k == state.kernel and st == "installed"]
    version = (
        str(plan.target) if plan.target else state.next_driver or (built[-1] if built else None)
    )
    if version is None:
        return Check(
            cid,
            SKIP,
            "no NVIDIA driver loaded and no --target-driver: no module version to look for",
            "",
            src,
        )
    if out is not None and not out.ok and not state.kmods:
        sev = WARN if out.missing else BLOCK
        return Check(
            cid,
            sev,
            f"{out.why()}: cannot tell which kernels have an nvidia module"
            + (" and NVIDIA's DKMS streams need dkms (EPEL)" if out.missing else ""),
            _pkg(state, "install", "dkms")
            + (
                " (from EPEL), or use NVIDIA's precompiled kmod streams"
                if state.family == "el"
                else ""
            ),
            src,
        )
    devel = set(state.rpm.installed.get("kernel-devel", ())) if state.rpm else set()
    boot = _boot_kernels(state)
    problems: list[str] = []
    notes: list[str] = []
    for kernel in _installed_kernels(state):
        how = _covered(state, version, kernel)
        role = (
            "running"
            if kernel == state.kernel
            else ("next boot" if kernel == state.default_kernel else "installed")
        )
        if how is not None:
            notes.append(f"{kernel} ({role}): {how}")
        elif plan.target is not None and kernel in devel and out is not None and out.ok:
            notes.append(
                f"{kernel} ({role}): DKMS builds {version} at install (kernel-devel present)"
            )
        elif kernel in boot:
            problems.append(
                f"{kernel} ({role}) has no nvidia {version} module"
                + ("" if kernel in devel else " and no kernel-devel to build one")
            )
        else:
            notes.append(f"{kernel} ({role}): no nvidia {version} module (fallback kernel)")
    broken = [
        f"{m}/{v}: {st}"
        for m, v, k, st in _nvidia_entries(state)
        if st in ("broken", "built", "added")
    ]
    if problems:
        return Check(
            cid,
            BLOCK,
            "; ".join(problems) + (f" (other: {'; '.join(notes)})" if notes else ""),
            "install kernel-devel for that kernel so DKMS builds the module (dkms "
            "autoinstall -k KERNEL), or the precompiled kmod for it; "
            "a reboot into it otherwise leaves the GPUs without a driver",
            src,
        )
    if broken:
        return Check(
            cid,
            WARN,
            f"DKMS holds unfinished nvidia entries: {', '.join(broken)}; " + "; ".join(notes),
            "dkms remove MODULE/VERSION --all for stale entries, or dkms install them",
            src,
        )
    if not notes:
        return Check(cid, SKIP, "no installed kernel found to check", "", src)
    return Check(cid, OK, "; ".join(notes), "", src)


# --- the driver ------------------------------------------------------------------------------


def driver_version(state: HostState, plan: Plan, today: dt.date) -> Check:
    cid = "driver.version"
    srcs = (host_rules.NVML_MISMATCH_SOURCE,)
    smi = state.out("smi")
    smi_text = (smi.stdout + smi.stderr) if smi is not None else ""
    if state.reboot_pending:
        mismatch = "version mismatch" in smi_text.lower()
        return Check(
            cid,
            WARN,
            f"reboot pending: the loaded nvidia module is {state.loaded_driver}, the installed "
            f"driver is {state.installed_driver} ({_installed_from(state)})"
            + (f'; until then NVML reports "{host_rules.NVML_MISMATCH}"' if mismatch else "")
            + f"; after the reboot {state.installed_driver} runs (the checks below judge that)",
            f"drain the host and reboot into {state.installed_driver} before changing the driver "
            "again (nvidia-ctk and nvidia-smi cannot work under the mismatch)",
            srcs,
        )
    if "version mismatch" in smi_text.lower():
        return Check(
            cid,
            BLOCK,
            f'NVML reports "{host_rules.NVML_MISMATCH}": the loaded kernel '
            f"module ({state.module.version if state.module else '?'}) is not the "
            "userspace driver's version (an earlier upgrade without a reboot)",
            "reboot (or unload and reload the nvidia modules) before changing the driver again",
            srcs,
        )
    if state.module is None and state.driver is None:
        why = smi.why() if smi is not None and not smi.ok else "no nvidia-smi output"
        pci = state.pci.gpus if state.pci else ()
        text = f"no NVIDIA driver is loaded (no /proc/driver/nvidia/version; {why})"
        built = [
            f"{m}/{v}"
            for m, v, k, st in _nvidia_entries(state)
            if k == state.kernel and st in ("installed", "installed-weak")
        ]
        if pci and built:
            return Check(
                cid,
                WARN,
                f"{text}, though {built[0]} is installed for the running kernel and lspci shows "
                f"{len(pci)} NVIDIA GPU(s): the module does not load",
                "find out why before changing the driver: `journalctl -k -b | grep -i nvidia` "
                "(see secureboot.mok for a rejected signing key)",
                srcs,
            )
        if pci:
            return Check(
                cid,
                WARN,
                f"{text}; lspci shows {len(pci)} NVIDIA GPU(s)",
                "a first install: pass --target-driver to judge the plan",
                srcs,
            )
        return Check(
            cid,
            WARN,
            f"{text}, and no NVIDIA GPU is visible",
            "nothing to upgrade here: run preflight on the GPU hosts",
            srcs,
        )
    versions = {
        "kernel module": state.module.version if state.module else None,
        "/sys/module/nvidia/version": state.sys_module_version,
        "NVML (nvidia-smi)": state.smi_gpus[0].driver if state.smi_gpus else None,
    }
    seen = {k: v for k, v in versions.items() if v}
    if len(set(seen.values())) > 1:
        listed = ", ".join(f"{k} {v}" for k, v in seen.items())
        return Check(
            cid,
            BLOCK,
            f"driver versions disagree: {listed}",
            "reboot so the kernel module and the userspace libraries match",
            srcs,
        )
    if smi is not None and not smi.ok:
        return Check(
            cid,
            BLOCK,
            f"the nvidia module {state.driver} is loaded but {smi.why()}",
            "check `dmesg` for NVRM errors and that nvidia-smi matches the module",
            srcs,
        )
    assert state.driver is not None
    current = DriverVersion(state.driver) if _is_driver(state.driver) else None
    text = f"driver {state.driver} ({', '.join(seen)} agree)"
    sev, fixes, out_srcs = OK, [], list(srcs)
    if current is not None:
        cuda_note, cuda_sev = _cuda_banner(state, current)
        if cuda_note:
            text += f"; {cuda_note}"
            sev = max(sev, cuda_sev, key=lambda v: v.rank)
            out_srcs.append(driver_rules.BRANCH_CUDA_SOURCE)
        life = driver_rules.branch_status(current.major, today)
        text += f"; {life.text}"
        out_srcs.append(life.source)
        if life.past_eol:
            sev = BLOCK if plan.strict else max(sev, WARN, key=lambda v: v.rank)
            fixes.append("move to a supported branch (LTSB R580 or a current production branch)")
        elif life.state == "ending":
            sev = max(sev, WARN, key=lambda v: v.rank)
            fixes.append("plan the move to a supported branch before that date")
    return Check(cid, sev, text, "; ".join(fixes), tuple(out_srcs))


def _cuda_banner(state: HostState, driver: DriverVersion) -> tuple[str, Severity]:
    """nvidia-smi's "CUDA Version" against the rules' branch table; a disagreement is worth a
    look (the image judgement uses what the host reports)."""
    table = driver_rules.driver_cuda_version(driver)
    reported = state.smi_q.cuda if state.smi_q else ""
    if not reported:
        return "", OK
    if table is None:
        return (
            f"nvidia-smi reports CUDA {reported}; R{driver.major} is not in the rules' branch "
            "table (the host's value is used)",
            OK,
        )
    try:
        agree = Version(reported) == table
    except InvalidVersion:
        agree = False
    if agree:
        return f"CUDA {reported} (nvidia-smi and the branch table agree)", OK
    return (
        f"nvidia-smi reports CUDA {reported} but the branch table says {table} for "
        f"R{driver.major}: the image judgement uses the host's {reported}; check "
        "builder/facts/drivers.py BRANCH_CUDA",
        WARN,
    )


def _installed_from(state: HostState) -> str:
    if state.installed_module_version:
        return "`modinfo nvidia` of the module on disk"
    return "the nvidia-driver package"


def _is_driver(text: str) -> bool:
    try:
        DriverVersion(text)
    except ValueError:
        return False
    return True


def driver_target(state: HostState, plan: Plan, today: dt.date) -> Check:
    cid = "driver.target"
    if plan.target is None:
        return Check(cid, SKIP, "no --target-driver given: only the current state is checked")
    target, branch = plan.target, plan.target.major
    flavour = plan.flavour(state)
    msgs: list[str] = []
    sev = OK
    srcs = [DATACENTER_DRIVER_LIFECYCLE]
    current = state.driver
    if current and _is_driver(current):
        cur = DriverVersion(current)
        if cur == target:
            msgs.append(f"{target} is already the running driver")
        elif cur > target:
            msgs.append(f"{target} is older than the running {current}: a downgrade")
            sev = WARN
        else:
            msgs.append(f"upgrade {current} -> {target}")
    else:
        msgs.append(f"install {target} (no driver runs now)")
    life = driver_rules.branch_status(branch, today)
    msgs.append(life.text)
    srcs.append(life.source)
    if life.past_eol:
        sev = BLOCK if plan.strict else max(sev, WARN, key=lambda v: v.rank)
    elif life.state in ("ending", "unknown"):
        sev = max(sev, WARN, key=lambda v: v.rank)
    cuda = driver_rules.driver_cuda_version(target)
    msgs.append(
        f"R{branch} supports CUDA {cuda}"
        if cuda is not None
        else f"the CUDA version of R{branch} is not in the rules' table"
    )
    if flavour == "proprietary" and branch >= driver_rules.PROPRIETARY_REMOVED_FROM_BRANCH:
        msgs.append(
            f"R{branch} has no proprietary kernel modules (removed from "
            f"R{driver_rules.PROPRIETARY_REMOVED_FROM_BRANCH})"
        )
        sev = BLOCK
        srcs.append(driver_rules.MODULE_SOURCE)
    too_new = [g for g in state.gpus if g.min_branch is not None and branch < g.min_branch]
    for g in too_new:
        msgs.append(f"{g.name} needs R{g.min_branch} or newer")
        sev = BLOCK
    if too_new:
        srcs.append(
            gpu_rules.GPUS[too_new[0].catalogue.key].source if too_new[0].catalogue else CUDA_GPUS
        )
    need_open = [g for g in state.gpus if g.needs_open_modules]
    if flavour == "proprietary" and need_open:
        msgs.append(
            f"{need_open[0].name} needs the open kernel modules; the plan installs proprietary ones"
        )
        sev = BLOCK
        srcs.append(gpu_rules.OPEN_MODULES_SOURCE)
    msgs.append(f"kernel modules: {flavour}")
    fix = {
        BLOCK: "pick a supported branch that every GPU supports, with the open kernel modules "
        "where required (dnf module enable nvidia-driver:<branch>-open)",
        WARN: "check the branch's lifecycle and the notes above before committing to it",
        OK: "",
    }[sev]
    return Check(cid, sev, "; ".join(msgs), fix, tuple(srcs))


def driver_module(state: HostState, plan: Plan, today: dt.date) -> Check:
    cid = "driver.module"
    srcs = (host_rules.MODULE_FLAVOUR_SOURCE, gpu_rules.OPEN_MODULES_SOURCE)
    flavour = state.flavour
    if flavour is None:
        return Check(cid, SKIP, "no NVIDIA kernel module is loaded or installed", "", srcs)
    where = "loaded" if state.module else "installed (not loaded)"
    need_open = [g for g in state.gpus if g.needs_open_modules]
    if flavour == "proprietary" and need_open:
        names = _gpu_summary(need_open)
        return Check(
            cid,
            BLOCK,
            f"the {where} nvidia module is proprietary, but {names} "
            "need(s) the open kernel modules (proprietary ones are unsupported on Grace "
            "Hopper and Blackwell)",
            "switch to the open modules: dnf module switch-to "
            "nvidia-driver:<branch>-open (or dnf swap to kmod-nvidia-open-dkms)",
            srcs,
        )
    pre_turing = [g for g in state.gpus if g.cc and g.cc < driver_rules.OPEN_MODULES_MIN_CC]
    if flavour == "open" and pre_turing:
        return Check(
            cid,
            BLOCK,
            f"the open kernel modules need Turing (7.5) or newer; "
            f"{_gpu_summary(pre_turing)} is older",
            "use the proprietary modules on a branch that still has them",
            srcs,
        )
    if state.module and state.installed_flavour and state.installed_flavour != flavour:
        return Check(
            cid,
            WARN,
            f"the loaded module is {flavour} but the one on disk is "
            f"{state.installed_flavour} (a module change awaits a reboot)",
            "reboot before the upgrade so preflight sees what will load",
            srcs,
        )
    line = state.module.line if state.module else f"modinfo license: {flavour}"
    return Check(cid, OK, f"{flavour} kernel module {where} ({line})", "", srcs)


def gpu_inventory(state: HostState, plan: Plan, today: dt.date) -> Check:
    cid, srcs = "gpu.inventory", (CUDA_GPUS,)
    if not state.gpus:
        return Check(
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
        DriverVersion(state.driver).major if state.driver and _is_driver(state.driver) else None
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
            parts.append(
                f"seen on PCI only (not in NVML): {_gpu_summary(group)} at {buses}: {note}"
            )
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
    return Check(cid, sev, "; ".join(parts), fix, srcs)


def _groups(gpus: list[HostGpu]) -> dict[str, list[HostGpu]]:
    out: dict[str, list[HostGpu]] = {}
    for g in gpus:
        out.setdefault(f"{g.name}|{g.cc}", []).append(g)
    return out


# --- Secure Boot, nouveau --------------------------------------------------------------------


def secure_boot(state: HostState, plan: Plan, today: dt.date) -> Check:
    cid = "secureboot.mok"
    srcs = (host_rules.DKMS_MOK_SOURCE, host_rules.SECURE_BOOT_REJECT_SOURCE)
    out = state.out("sb-state")
    if state.secure_boot is None:
        why = out.why() if out is not None and not out.ok else "unrecognised output"
        if not _has_nvidia(state, plan):
            return Check(cid, SKIP, f"Secure Boot state unknown ({why}); no NVIDIA driver to load")
        return Check(
            cid,
            WARN,
            f"cannot tell whether Secure Boot is on ({why})",
            _pkg(state, "install", "mokutil") + ", then rerun",
            srcs,
        )
    if state.secure_boot == "unsupported":
        return Check(cid, OK, "no Secure Boot (legacy BIOS or no EFI variables)", "", srcs)
    if state.secure_boot == "disabled":
        return Check(cid, OK, "Secure Boot is disabled: unsigned modules load", "", srcs)
    dkms = state.out("dkms")
    uses_dkms = dkms is not None and dkms.ok
    if not uses_dkms:
        return Check(
            cid,
            WARN,
            "Secure Boot is enabled and no DKMS is in use: the precompiled "
            "modules must be signed by a key the firmware or MOK trusts",
            "check `mokutil --list-enrolled` holds the vendor key of the kmod packages",
            srcs,
        )
    fix = (
        f"enroll the DKMS key before the upgrade: mokutil --import {host_rules.DKMS_MOK_CERT}, "
        "reboot and confirm in MokManager (otherwise modprobe fails with "
        f'"{host_rules.SECURE_BOOT_REJECT}")'
    )
    enrolled = f" (enrolled keys: {'; '.join(state.mok_enrolled)})" if state.mok_enrolled else ""
    if not state.mok_key_exists:
        return Check(
            cid,
            BLOCK,
            f"Secure Boot is enabled and DKMS has no signing key at "
            f"{host_rules.DKMS_MOK_CERT} yet: the key it makes at the next build is not "
            f"enrolled, so the new module will not load{enrolled}",
            "create the key first (dkms generate_mok) and " + fix,
            srcs,
        )
    if state.mok_test == "not-enrolled":
        return Check(
            cid,
            BLOCK,
            f"Secure Boot is enabled and the DKMS signing key "
            f"{host_rules.DKMS_MOK_CERT} is not enrolled: DKMS-built modules will not "
            f"load{enrolled}",
            fix,
            srcs,
        )
    if state.mok_test == "pending":
        return Check(
            cid,
            WARN,
            f"the DKMS key {host_rules.DKMS_MOK_CERT} awaits enrolment at the next boot",
            "reboot and confirm the key in MokManager before the upgrade",
            srcs,
        )
    if state.mok_test == "enrolled":
        return Check(
            cid,
            OK,
            f"Secure Boot is enabled and the DKMS key {host_rules.DKMS_MOK_CERT} is enrolled",
            "",
            srcs,
        )
    test = state.out("mok-test")
    why = test.why() if test is not None and not test.ok else "unrecognised output"
    return Check(cid, WARN, f"cannot tell whether the DKMS key is enrolled ({why})", fix, srcs)


def nouveau(state: HostState, plan: Plan, today: dt.date) -> Check:
    cid, srcs = "nouveau", (host_rules.NOUVEAU_SOURCE,)
    if not _has_nvidia(state, plan):
        return Check(cid, SKIP, "no NVIDIA GPU or driver here", "", srcs)
    fix = (
        "write /etc/modprobe.d/blacklist-nouveau.conf with `blacklist nouveau` and `options "
        "nouveau modeset=0`, run `dracut --force` and reboot"
    )
    if state.lsmod is None:
        out = state.out("lsmod")
        return Check(
            cid, WARN, f"cannot list loaded modules ({out.why() if out else '?'})", fix, srcs
        )
    if "nouveau" in state.lsmod:
        return Check(
            cid, BLOCK, "nouveau is loaded: the nvidia module cannot take the GPUs", fix, srcs
        )
    if not state.blacklist.blacklisted:
        return Check(
            cid,
            WARN,
            "nouveau is not loaded but not blacklisted either: a kernel or "
            "initramfs update can bring it back",
            fix,
            srcs,
        )
    return Check(
        cid,
        OK,
        f"nouveau is not loaded and is blacklisted ({', '.join(state.blacklist.where)}"
        + ("; modeset=0" if state.blacklist.modeset0 else "")
        + ")",
        "",
        srcs,
    )


# --- services --------------------------------------------------------------------------------


def persistenced(state: HostState, plan: Plan, today: dt.date) -> Check:
    cid, srcs = "persistenced", (host_rules.PERSISTENCED_SOURCE,)
    unit = host_rules.PERSISTENCED_UNIT
    if not state.gpus:
        return Check(cid, SKIP, "no GPU visible", "", srcs)
    if not any(g.source == "nvml" for g in state.gpus):
        return Check(cid, SKIP, "NVML lists no GPU: nothing for the daemon to hold", "", srcs)
    if unit not in state.units:
        out = state.out("systemctl")
        why = out.why() if out is not None and not out.ok else "no answer for the unit"
        return Check(cid, WARN, f"cannot ask systemd about {unit} ({why})", "", srcs)
    active, enabled = state.units[unit]
    datacenter = any(g.datacenter for g in state.gpus)
    fix = f"systemctl enable --now {unit}"
    if active == "active" and enabled == "enabled":
        return Check(cid, OK, f"{unit} is active and enabled", "", srcs)
    now = "not installed" if enabled == "not-found" else f"{active or '?'} and {enabled or '?'}"
    return Check(
        cid,
        WARN if datacenter else OK,
        f"{unit} is {now}" + ("" if datacenter else " (optional without data center GPUs)"),
        fix,
        srcs,
    )


def _nvswitch(state: HostState) -> bool:
    fabric = any(g.fabric_state and g.fabric_state.upper() != "N/A" for g in state.gpus)
    switches = bool(state.pci and state.pci.nvswitches)
    return fabric or switches


def fabricmanager(state: HostState, plan: Plan, today: dt.date) -> Check:
    cid, srcs = "fabricmanager", (host_rules.FABRICMANAGER_SOURCE,)
    unit = host_rules.FABRICMANAGER_UNIT
    rpm_fm = state.rpm.installed.get(host_rules.FABRICMANAGER_PACKAGE, ()) if state.rpm else ()
    if not _nvswitch(state) and not state.fm_version and not rpm_fm:
        return Check(
            cid,
            SKIP,
            "no NVSwitch fabric (no fabric state in NVML, no NVSwitch on "
            "PCI) and no fabric manager installed",
            "",
            srcs,
        )
    fm = state.fm_version or (rpm_fm[0].split("-")[0] if rpm_fm else None)
    driver = state.next_driver
    pkg = f"{host_rules.FABRICMANAGER_PACKAGE}-{plan.target or driver or '<driver>'}"
    after = (
        (
            f"; upgrade it with the driver, in the same transaction, to exactly {plan.target} "
            "(dnf module profile nvidia-driver:<stream>/fm)"
        )
        if plan.target
        else ""
    )
    if fm is None:
        return Check(
            cid,
            BLOCK,
            "NVSwitch system without nvidia-fabricmanager: CUDA cannot use the fabric",
            f"dnf install {pkg} && systemctl enable --now {unit}",
            srcs,
        )
    if driver and fm != driver:
        return Check(
            cid,
            BLOCK,
            f"fabric manager {fm} != driver {driver}: it must be exactly the "
            "driver's version (it refuses to start otherwise)",
            f"dnf install {pkg}, then systemctl restart {unit}{after}",
            srcs,
        )
    active, enabled = state.units.get(unit, ("unknown", "unknown"))
    if active != "active":
        active = "not installed as a service" if enabled == "not-found" else active
        pending = state.reboot_pending and enabled == "enabled"
        return Check(
            cid,
            WARN if pending else BLOCK,
            f"fabric manager {fm} is installed but {unit} is {active}"
            + (
                f"; it is enabled and matches {driver}, the driver after the pending reboot"
                if pending
                else ""
            ),
            "reboot (it starts with the matching module)"
            if pending
            else f"systemctl enable --now {unit}{after}",
            srcs,
        )
    return Check(
        cid,
        OK,
        f"fabric manager {fm} matches the driver and is active",
        after.removeprefix("; "),
        srcs,
    )


# --- container stack -------------------------------------------------------------------------


def toolkit(state: HostState, plan: Plan, today: dt.date) -> Check:
    cid, srcs = "toolkit.version", (host_rules.CDI_MIN_TOOLKIT_SOURCE,)
    ctk = _version(state.ctk_version)
    out = state.out("nvidia-ctk")
    if ctk is None:
        why = out.why() if out is not None and not out.ok else "unrecognised version"
        sev = WARN if _has_nvidia(state, plan) else SKIP
        return Check(
            cid,
            sev,
            f"nvidia-container-toolkit: {why}: podman gets no GPU through CDI without it",
            _pkg(state, "install", "nvidia-container-toolkit")
            + " (NVIDIA's libnvidia-container repository)",
            srcs,
        )
    if ctk < host_rules.CDI_MIN_TOOLKIT:
        return Check(
            cid,
            BLOCK,
            f"nvidia-container-toolkit {ctk} predates CDI (needs >= {host_rules.CDI_MIN_TOOLKIT})",
            "upgrade nvidia-container-toolkit",
            srcs,
        )
    if ctk < host_rules.CDI_REFRESH_TOOLKIT:
        return Check(
            cid,
            OK,
            f"nvidia-container-toolkit {ctk} (>= {host_rules.CDI_MIN_TOOLKIT} "
            f"for CDI; the automatic spec refresh needs {host_rules.CDI_REFRESH_TOOLKIT})",
            "",
            (*srcs, host_rules.CDI_REFRESH_SOURCE),
        )
    return Check(cid, OK, f"nvidia-container-toolkit {ctk}", "", srcs)


def cdi_spec(state: HostState, plan: Plan, today: dt.date) -> Check:
    cid = "cdi.spec"
    srcs = (host_rules.CDI_SUPPORT_DOC, host_rules.CDI_STALE_SOURCE)
    regen = "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"
    if state.cdi_errors and not state.cdi_specs:
        return Check(cid, BLOCK, "; ".join(state.cdi_errors), f"regenerate it: {regen}", srcs)
    if not state.cdi_specs:
        if state.ctk_version is None and not state.gpus:
            return Check(cid, SKIP, "no CDI spec and no container toolkit", "", srcs)
        return Check(
            cid,
            WARN,
            f"no NVIDIA CDI spec in {' or '.join(host_rules.CDI_SPEC_DIRS)}: "
            "`podman run --device nvidia.com/gpu=all` fails (unresolvable CDI devices)",
            regen,
            srcs,
        )
    problems, notes = [], []
    kinds = Counter(s.kind for s in state.cdi_specs)
    for spec in state.cdi_specs:
        missing = state.cdi_missing.get(spec.path, [])
        if missing:
            problems.append(
                f"{spec.path}: {len(missing)} of {len(spec.host_paths)} paths do not "
                f"exist (e.g. {missing[0]})"
            )
        nxt = state.next_driver
        if spec.driver_version and nxt and spec.driver_version != nxt:
            problems.append(
                f"{spec.path} was generated for driver {spec.driver_version}, the "
                f"driver is {nxt}"
                + (" after the pending reboot" if state.reboot_pending else "")
                + " (stale)"
            )
        elif spec.driver_version and state.reboot_pending:
            notes.append(
                f"{spec.path} is generated for {spec.driver_version}: right for the driver "
                "after the pending reboot (do not regenerate it under the mismatch)"
            )
        names = set(spec.devices)
        unlisted = [
            g
            for g in state.gpus
            if g.source == "nvml" and g.uuid not in names and str(g.index) not in names
        ]
        if unlisted:
            problems.append(
                f"{spec.path} does not list GPU {unlisted[0].index} ({unlisted[0].uuid})"
            )
        notes.append(
            f"{spec.path} (kind {spec.kind}, {len(spec.devices)} devices, "
            f"{len(spec.host_paths)} paths, driver {spec.driver_version or '?'})"
        )
    dupes = [k for k, n in kinds.items() if n > 1]
    if dupes:
        problems.append(
            f"{kinds[dupes[0]]} specs declare kind {dupes[0]} (podman refuses "
            "conflicting device names)"
        )
    if problems:
        return Check(cid, BLOCK, "; ".join(problems), f"regenerate the spec: {regen}", srcs)
    refresh = state.units.get(host_rules.CDI_REFRESH_UNIT, ("", ""))
    if plan.target is not None:
        if refresh[1] == "enabled":
            return Check(
                cid,
                OK,
                "; ".join(notes) + f"; {host_rules.CDI_REFRESH_UNIT} rewrites "
                "/var/run/cdi/nvidia.yaml after the upgrade",
                "",
                (*srcs, host_rules.CDI_REFRESH_SOURCE),
            )
        return Check(
            cid,
            WARN,
            "; ".join(notes) + f"; it goes stale when {plan.target} replaces the driver",
            f"after the upgrade (before starting GPU containers): {regen}",
            srcs,
        )
    return Check(cid, OK, "; ".join(notes), "", srcs)


def podman(state: HostState, plan: Plan, today: dt.date) -> Check:
    cid, srcs = "podman.version", (host_rules.PODMAN_CDI_SOURCE,)
    version = _version(state.podman_version)
    if version is None:
        out = state.out("podman")
        why = out.why() if out is not None and not out.ok else "unrecognised version"
        return Check(
            cid,
            WARN,
            f"podman: {why}: the training images cannot run here",
            _pkg(state, "install", "podman"),
            srcs,
        )
    if version < host_rules.PODMAN_CDI_MIN:
        return Check(
            cid,
            BLOCK,
            f"podman {version} has no native CDI (needs >= "
            f"{host_rules.PODMAN_CDI_MIN}): --device nvidia.com/gpu=all fails",
            _pkg(state, "upgrade", "podman"),
            srcs,
        )
    return Check(
        cid, OK, f"podman {version} (native CDI from {host_rules.PODMAN_CDI_MIN})", "", srcs
    )


def selinux(state: HostState, plan: Plan, today: dt.date) -> Check:
    cid, srcs = "selinux.mode", (host_rules.SELINUX_SOURCE,)
    if state.selinux is None:
        out = state.out("getenforce")
        why = out.why() if out is not None and not out.ok else "unrecognised output"
        return Check(cid, SKIP, f"SELinux mode unknown ({why})", "", srcs)
    if state.selinux == "Enforcing":
        return Check(
            cid,
            OK,
            "SELinux is Enforcing: GPU containers need "
            "`--security-opt=label=disable` (NVIDIA's example) or the "
            "container_use_devices boolean",
            "setsebool -P container_use_devices on (or run with --security-opt=label=disable)",
            srcs,
        )
    return Check(cid, OK, f"SELinux is {state.selinux}", "", srcs)


def gpu_processes(state: HostState, plan: Plan, today: dt.date) -> Check:
    cid, srcs = "gpu.processes", (host_rules.GPU_PROCESSES_SOURCE,)
    if not any(g.source == "nvml" for g in state.gpus):
        return Check(cid, SKIP, "NVML lists no GPU, so no process can hold one", "", srcs)
    if state.apps is None:
        out = state.out("smi-apps")
        return Check(
            cid, WARN, f"cannot list GPU processes ({out.why() if out else 'not asked'})", "", srcs
        )
    if not state.apps:
        return Check(cid, OK, "no compute process uses the GPUs", "", srcs)
    listed = ", ".join(f"{a.pid} {a.name} ({a.memory})" for a in state.apps[:5])
    more = f" and {len(state.apps) - 5} more" if len(state.apps) > 5 else ""
    return Check(
        cid,
        WARN,
        f"{len(state.apps)} process(es) use the GPUs now: {listed}{more}; the "
        "upgrade unloads the module and they die (or block the unload)",
        "drain the host: stop the jobs and containers first",
        srcs,
    )


def disk_free(state: HostState, plan: Plan, today: dt.date) -> Check:
    cid, srcs = "disk.free", (host_rules.FREE_DISK_SOURCE,)
    if not state.disk:
        return Check(cid, SKIP, "df gave nothing to judge", "", srcs)
    low, parts = [], []
    for d in state.disk:
        need = host_rules.FREE_MB.get(d.path, 0)
        mb = d.avail_kb // 1024
        parts.append(f"{d.path} ({d.mount}) {mb} MB free")
        if mb < need:
            low.append(f"{d.path} has {mb} MB free, needs {need} MB")
    if low:
        return Check(
            cid,
            WARN,
            "; ".join(low),
            "free space before the DKMS build and the new initramfs",
            srcs,
        )
    return Check(cid, OK, "; ".join(parts), "", srcs)


CHECKS: tuple[tuple[str, Callable[[HostState, Plan, dt.date], Check]], ...] = (
    ("host.os", host_os),
    ("kernel.devel", kernel_devel),
    ("dkms.nvidia", dkms_modules),
    ("driver.version", driver_version),
    ("driver.target", driver_target),
    ("driver.module", driver_module),
    ("gpu.inventory", gpu_inventory),
    ("secureboot.mok", secure_boot),
    ("nouveau", nouveau),
    ("persistenced", persistenced),
    ("fabricmanager", fabricmanager),
    ("toolkit.version", toolkit),
    ("cdi.spec", cdi_spec),
    ("podman.version", podman),
    ("selinux.mode", selinux),
    ("gpu.processes", gpu_processes),
    ("disk.free", disk_free),
    ("driver.dependents", admin_checks.driver_dependents),
    ("gpu.mig", admin_checks.gpu_mig),
    ("gpu.memory", admin_checks.gpu_memory),
    ("gpu.xid", admin_checks.gpu_xid),
    ("driver.runfile", admin_checks.driver_runfile),
    ("packages.pins", admin_checks.package_pins),
)

# Every id a host report can carry (reachability, the checks above, the image impact).
CHECK_IDS = ("host.reach", *(cid for cid, _ in CHECKS), "images.impact")

# The gather steps (builder.preflight.gather.STEPS) whose data each check reads: an exception
# in one of them is named in the check's finding.
STEP_OF: dict[str, tuple[str, ...]] = {
    "host.os": ("os",),
    "kernel.devel": ("os", "packages"),
    "dkms.nvidia": ("packages", "dkms"),
    "driver.version": ("driver",),
    "driver.target": ("driver", "gpus"),
    "driver.module": ("driver", "gpus"),
    "gpu.inventory": ("driver", "gpus"),
    "secureboot.mok": ("dkms",),
    "nouveau": ("nouveau",),
    "persistenced": ("services", "gpus"),
    "fabricmanager": ("services", "packages"),
    "toolkit.version": ("container",),
    "cdi.spec": ("cdi", "nouveau"),
    "podman.version": ("container",),
    "selinux.mode": ("container",),
    "gpu.processes": ("driver",),
    "disk.free": ("disk",),
    "driver.dependents": ("driver",),
    "gpu.mig": ("driver",),
    "gpu.memory": ("driver",),
    "gpu.xid": ("admin",),
    "driver.runfile": ("admin", "packages"),
    "packages.pins": ("admin",),
}


def run_one(
    cid: str,
    check: Callable[[HostState, Plan, dt.date], Check],
    state: HostState,
    plan: Plan,
    today: dt.date,
) -> Check:
    """One check, isolated: its own exception, or one in the probes it reads, becomes its own
    finding (a warning: nothing could be judged) and never the host's (TRAINIMG_DEBUG=1 raises
    it instead)."""
    failed = [
        f"{step}: {state.errors[step]}" for step in STEP_OF.get(cid, ()) if step in state.errors
    ]
    try:
        result = check(state, plan, today)
    except Exception as exc:
        if os.environ.get("TRAINIMG_DEBUG"):
            raise
        return Check(
            cid,
            WARN,
            f"this check failed on what the host returned: {type(exc).__name__}: {exc}"
            + (f" (probes that failed: {'; '.join(failed)})" if failed else ""),
            "inspect that input by hand; please report it (TRAINIMG_DEBUG=1 shows the traceback)",
        )
    if not failed:
        return result
    severity = result.severity if result.severity.rank >= WARN.rank else WARN
    return Check(
        cid,
        severity,
        f"{result.finding} (incomplete: reading the host failed in {'; '.join(failed)})",
        result.remediation or "inspect that input by hand; please report it",
        result.sources,
    )


def run_checks(state: HostState, plan: Plan, today: dt.date) -> list[Check]:
    return [run_one(cid, check, state, plan, today) for cid, check in CHECKS]
