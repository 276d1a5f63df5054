"""Host checks of the NVIDIA driver (pure): what runs now (and after a pending reboot), the
planned target, and the kernel-module flavour against the GPUs."""

from __future__ import annotations

import datetime as dt

from packaging.version import InvalidVersion, Version

from builder.facts import drivers as driver_rules
from builder.facts import gpus as gpu_rules
from builder.facts import host as host_rules
from builder.facts.driver_version import DriverVersion
from builder.facts.sources import CUDA_GPUS, DATACENTER_DRIVER_LIFECYCLE
from builder.judgement.finding import Finding
from builder.judgement.registry import check
from builder.judgement.severity import BLOCK, OK, SKIP, WARN, Severity
from builder.preflight.checks.common import (
    gpu_summary,
    is_driver_version,
    nvidia_dkms_entries,
)
from builder.preflight.host_state import HostState
from builder.preflight.model import UpgradePlan


@check("driver.version", "host", reads=("driver",))
def driver_version(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Does the loaded driver agree everywhere, and is its branch still supported?"""
    srcs = (host_rules.NVML_MISMATCH_SOURCE,)
    smi = state.out("smi")
    smi_text = (smi.stdout + smi.stderr) if smi is not None else ""
    if state.reboot_pending:
        mismatch = "version mismatch" in smi_text.lower()
        return Finding(
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
        return Finding(
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
            for m, v, k, st in nvidia_dkms_entries(state)
            if k == state.kernel and st in ("installed", "installed-weak")
        ]
        if pci and built:
            return Finding(
                cid,
                WARN,
                f"{text}, though {built[0]} is installed for the running kernel and lspci shows "
                f"{len(pci)} NVIDIA GPU(s): the module does not load",
                "find out why before changing the driver: `journalctl -k -b | grep -i nvidia` "
                "(see secureboot.mok for a rejected signing key)",
                srcs,
            )
        if pci:
            return Finding(
                cid,
                WARN,
                f"{text}; lspci shows {len(pci)} NVIDIA GPU(s)",
                "a first install: pass --target-driver to judge the plan",
                srcs,
            )
        return Finding(
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
        return Finding(
            cid,
            BLOCK,
            f"driver versions disagree: {listed}",
            "reboot so the kernel module and the userspace libraries match",
            srcs,
        )
    if smi is not None and not smi.ok:
        return Finding(
            cid,
            BLOCK,
            f"the nvidia module {state.driver} is loaded but {smi.why()}",
            "check `dmesg` for NVRM errors and that nvidia-smi matches the module",
            srcs,
        )
    assert state.driver is not None
    current = DriverVersion(state.driver) if is_driver_version(state.driver) else None
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
    return Finding(cid, sev, text, "; ".join(fixes), tuple(out_srcs))


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


@check("driver.target", "host", reads=("driver", "gpus"))
def driver_target(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Is the planned driver a supported branch every GPU and the module flavour accept?"""
    if plan.target is None:
        return Finding(cid, SKIP, "no --target-driver given: only the current state is checked")
    target, branch = plan.target, plan.target.major
    flavour = plan.flavour(state)
    msgs: list[str] = []
    sev = OK
    srcs = [DATACENTER_DRIVER_LIFECYCLE]
    current = state.driver
    if current and is_driver_version(current):
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
    return Finding(cid, sev, "; ".join(msgs), fix, tuple(srcs))


@check("driver.module", "host", reads=("driver", "gpus"))
def driver_module(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Is the kernel module's flavour (open or proprietary) one the GPUs can use?"""
    srcs = (host_rules.MODULE_FLAVOUR_SOURCE, gpu_rules.OPEN_MODULES_SOURCE)
    flavour = state.flavour
    if flavour is None:
        return Finding(cid, SKIP, "no NVIDIA kernel module is loaded or installed", "", srcs)
    where = "loaded" if state.module else "installed (not loaded)"
    need_open = [g for g in state.gpus if g.needs_open_modules]
    if flavour == "proprietary" and need_open:
        names = gpu_summary(need_open)
        return Finding(
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
        return Finding(
            cid,
            BLOCK,
            f"the open kernel modules need Turing (7.5) or newer; "
            f"{gpu_summary(pre_turing)} is older",
            "use the proprietary modules on a branch that still has them",
            srcs,
        )
    if state.module and state.installed_flavour and state.installed_flavour != flavour:
        return Finding(
            cid,
            WARN,
            f"the loaded module is {flavour} but the one on disk is "
            f"{state.installed_flavour} (a module change awaits a reboot)",
            "reboot before the upgrade so preflight sees what will load",
            srcs,
        )
    line = state.module.line if state.module else f"modinfo license: {flavour}"
    return Finding(cid, OK, f"{flavour} kernel module {where} ({line})", "", srcs)
