"""Host checks of the NVIDIA driver (pure): what runs now (and after a pending reboot), the
planned target, and the kernel-module flavour against the GPUs.

Each check judges the host as it is when no target is given, and the plan when one is (the
fleet runs both: builder/preflight/fleet.py). What a driver does for a GPU (first and last
branch, open or proprietary modules) and where a branch stands in NVIDIA's lifecycle come from
the one judgement (builder/judgement/image.py driver_gpu_findings, driver_life.branch_life):
the matrix rules and `trainimg compat` say the same with the same reason codes."""

from __future__ import annotations

import datetime as dt

from packaging.version import InvalidVersion, Version

from builder.facts import drivers as driver_rules
from builder.facts import host as host_rules
from builder.facts.sources import DATACENTER_DRIVER_LIFECYCLE
from builder.judgement.driver_life import branch_life
from builder.judgement.finding import Finding
from builder.judgement.image import driver_gpu_findings
from builder.judgement.image_facts import DriverState
from builder.judgement.registry import check
from builder.judgement.severity import BLOCK, OK, SKIP, WARN, Severity, worst
from builder.preflight.checks.common import gpu_summary, nvidia_dkms_entries
from builder.preflight.host_state import HostState
from builder.preflight.model import UpgradePlan

# The reason codes each check reports of driver_gpu_findings.
MODULE_CODES = ("gpu.needs-open-modules", "gpu.open-unsupported", "driver.proprietary-removed")
BRANCH_CODES = ("gpu.branch-too-old", "gpu.branch-dropped")


def _capped(plan: UpgradePlan, finding: Finding) -> Finding:
    """In the plan's verdict, a fault of the driver the plan replaces is a warning: the plan is
    what the gate judges (driver.target judges the new driver)."""
    if plan.target is None or finding.severity.rank <= WARN.rank:
        return finding
    return Finding(
        finding.id,
        WARN,
        f"{finding.message} (the plan replaces this driver with {plan.target})",
        finding.remediation,
        finding.sources,
        finding.subject,
        finding.reason,
    )


@check("driver.version", "host", reads=("driver",))
def driver_version(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Does the loaded driver agree everywhere, and is its branch still supported?"""
    srcs = (host_rules.NVML_MISMATCH_SOURCE,)
    if state.reboot_pending:
        installed = state.installed_driver
        mismatch = state.nvml_mismatch
        text = (
            f"reboot pending: the loaded nvidia module is {state.loaded_driver}, the installed "
            f"driver is {installed} ({_installed_from(state)})"
            + (f'; until then NVML reports "{host_rules.NVML_MISMATCH}"' if mismatch else "")
            + f"; after the reboot {installed} runs (the checks below judge that)"
        )
        fix = (
            f"drain the host and reboot into {installed} before changing the driver again "
            "(nvidia-ctk and nvidia-smi cannot work under the mismatch)"
        )
        if plan.target is not None and plan.target != installed:
            return Finding(
                cid,
                BLOCK,
                f"{text}; the plan installs {plan.target} on top of a change not yet booted",
                f"reboot into {installed} first, then rerun preflight for {plan.target}",
                srcs,
            )
        return Finding(cid, WARN, text, fix, srcs)
    found = _running(cid, state, plan, today)
    # a hung nvidia-smi or a GPU fallen off the bus is the host's, not the old driver's: the
    # plan does not fix it, so it blocks the plan too (broken now, builder/judgement/kind.py)
    return found if _smi_fault(state) else _capped(plan, found)


def _smi_fault(state: HostState) -> str:
    """What says nvidia-smi cannot be trusted whatever driver runs: it hung (the probe's
    deadline), or it reports a GPU that fell off the bus; "" when neither."""
    for probe in ("smi", "smi-q"):
        out = state.out(probe)
        if out is None:
            continue
        if out.timed_out:
            return out.why()
        said = next(
            (line.strip() for line in (out.stdout + "\n" + out.stderr).splitlines()
             if any(m in line for m in host_rules.GPU_LOST_MARKERS)),
            "",
        )  # fmt: skip
        if said:
            return f"a GPU has fallen off the bus (nvidia-smi: {said})"
    return ""


def _running(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    srcs = (host_rules.NVML_MISMATCH_SOURCE,)
    out = state.out("smi")
    if state.nvml_mismatch:
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
        return _no_driver(cid, state)
    versions = {
        "kernel module": state.module.version if state.module else None,
        "/sys/module/nvidia/version": state.sys_module_version,
        "NVML (nvidia-smi)": state.smi_gpus[0].driver if state.smi_gpus else None,
    }
    seen = {k: v for k, v in versions.items() if v is not None}
    if len({str(v) for v in seen.values()}) > 1:
        listed = ", ".join(f"{k} {v}" for k, v in seen.items())
        return Finding(
            cid,
            BLOCK,
            f"driver versions disagree: {listed}",
            "reboot so the kernel module and the userspace libraries match",
            srcs,
        )
    fault = _smi_fault(state)
    if fault or (out is not None and not out.ok):
        lost = fault.startswith("a GPU")
        return Finding(
            cid,
            BLOCK,
            f"the nvidia module {state.driver} is loaded but "
            + (fault or (out.why() if out is not None else "")),
            "reboot the host to recover the GPU, then run DCGM diagnostics (dcgmi diag -r 3) "
            "before any driver change: no driver brings it back"
            if lost
            else "check `dmesg` for NVRM errors and that nvidia-smi matches the module"
            + ("; a hung nvidia-smi is not fixed by the upgrade" if fault else ""),
            srcs + ((host_rules.GPU_LOST_SOURCE,) if lost else ()),
        )
    current = state.driver
    assert current is not None
    text = f"driver {current} ({', '.join(seen)} agree)"
    sev: Severity = OK
    fixes: list[str] = []
    out_srcs = list(srcs)
    cuda_note, cuda_sev = _cuda_banner(state, current)
    if cuda_note:
        text += f"; {cuda_note}"
        sev = worst((sev, cuda_sev))
        out_srcs.append(driver_rules.BRANCH_CUDA_SOURCE)
    life = branch_life(current.major, today, strict=plan.strict)
    text += f"; {life.message}"
    out_srcs.extend(life.sources)
    if plan.target is None:  # the plan replaces the branch: driver.target judges the new one
        sev = worst((sev, life.severity))
        if life.remediation:
            fixes.append(life.remediation)
    return Finding(cid, sev, text, "; ".join(fixes), tuple(out_srcs), reason=_reason(life, sev))


def _reason(life: Finding, sev: Severity) -> str:
    """The check's reason code: the lifecycle's when that is what the severity comes from."""
    return life.reason if life.severity is sev and sev.rank > OK.rank else ""


def _no_driver(cid: str, state: HostState) -> Finding:
    srcs = (host_rules.NVML_MISMATCH_SOURCE,)
    smi = state.out("smi")
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


def _cuda_banner(state: HostState, driver: Version) -> tuple[str, Severity]:
    """nvidia-smi's "CUDA Version" against the rules' branch table; a disagreement is worth a
    look (the image judgement uses what the host reports)."""
    entry = driver_rules.branch_cuda(driver.major)
    reported = state.smi_q.cuda if state.smi_q else ""
    if not reported:
        return "", OK
    if entry is None:
        return (
            f"nvidia-smi reports CUDA {reported}; R{driver.major} is not in the rules' branch "
            "table (the host's value is used)",
            OK,
        )
    try:
        have = Version(reported)
    except InvalidVersion:
        have = None
    agree = have is not None and (
        have == entry.cuda if entry.minor_known else have.major == entry.cuda.major
    )
    if agree:
        return f"CUDA {reported} (nvidia-smi and the branch table agree)", OK
    return (
        f"nvidia-smi reports CUDA {reported} but the branch table says {entry.text} for "
        f"R{driver.major}: the image judgement uses the host's {reported}; check "
        "builder/facts/drivers.py BRANCH_CUDA",
        WARN,
    )


def _installed_from(state: HostState) -> str:
    if state.installed_module_version:
        return "`modinfo nvidia` of the module on disk"
    return "the nvidia-driver package"


def _gpu_findings(state: HostState, driver: DriverState, codes: tuple[str, ...]) -> list[Finding]:
    gpus = tuple(g.identity for g in state.gpus if "vfio" not in g.pci_note)
    return [f for f in driver_gpu_findings(driver, gpus) if f.reason in codes]


@check("driver.target", "host", reads=("driver", "gpus"))
def driver_target(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Is the planned driver a supported branch that drives every GPU?"""
    if plan.target is None:
        return Finding(cid, SKIP, "no --target-driver given: only the current state is checked")
    target, branch = plan.target, plan.target.major
    flavour = plan.flavour(state)
    msgs: list[str] = []
    sev: Severity = OK
    srcs = [DATACENTER_DRIVER_LIFECYCLE]
    current = state.driver
    if current is not None:
        if current == target:
            msgs.append(f"{target} is already the running driver")
        elif current > target:
            msgs.append(f"{target} is older than the running {current}: a downgrade")
            sev = WARN
        else:
            msgs.append(f"upgrade {current} -> {target}")
    else:
        msgs.append(f"install {target} (no driver runs now)")
    life = branch_life(branch, today, strict=plan.strict)
    msgs.append(life.message)
    srcs.extend(life.sources)
    sev = worst((sev, life.severity))
    entry = driver_rules.branch_cuda(branch)
    msgs.append(
        f"R{branch} supports CUDA {entry.text}"
        if entry is not None
        else f"the CUDA version of R{branch} is not in the rules' table"
    )
    found = _gpu_findings(state, DriverState(target, flavour), BRANCH_CODES + MODULE_CODES[2:])
    for f in found:
        msgs.append(f.message)
        srcs.extend(f.sources)
    sev = worst((sev, *(f.severity for f in found)))
    msgs.append(f"kernel modules: {flavour}")
    top = next((f for f in found if f.severity is sev), None)
    fix = {
        BLOCK: top.remediation if top is not None else life.remediation,
        WARN: "check the branch's lifecycle and the notes above before committing to it",
        OK: "",
    }.get(sev, "")
    reason = top.reason if top is not None else _reason(life, sev)
    return Finding(cid, sev, "; ".join(msgs), fix, tuple(dict.fromkeys(srcs)), reason=reason)


@check("driver.module", "host", reads=("driver", "gpus"))
def driver_module(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Is the kernel module's flavour (open or proprietary) one the GPUs can use?"""
    srcs = (host_rules.MODULE_FLAVOUR_SOURCE,)
    if plan.target is not None:
        flavour = plan.flavour(state)
        found = _gpu_findings(state, DriverState(plan.target, flavour), MODULE_CODES[:2])
        now = f" (now: {state.flavour})" if state.flavour and state.flavour != flavour else ""
        if found:
            f = found[0]
            return Finding(
                cid, BLOCK, f"the plan installs {flavour} modules{now}: {f.message}",
                f.remediation, srcs + f.sources, reason=f.reason,
            )  # fmt: skip
        return Finding(cid, OK, f"the plan installs {flavour} kernel modules{now}", "", srcs)
    flavour = state.flavour
    if flavour is None or (state.driver is None and state.installed_driver is None):
        return Finding(cid, SKIP, "no NVIDIA kernel module is loaded or installed", "", srcs)
    where = "loaded" if state.module else "installed (not loaded)"
    version = state.driver or state.installed_driver
    assert version is not None
    found = _gpu_findings(state, DriverState(version, flavour), MODULE_CODES[:2])
    if found:
        f = found[0]
        names = gpu_summary([g for g in state.gpus if g.name == f.subject] or state.gpus)
        return Finding(
            cid,
            BLOCK,
            f"the {where} nvidia module is {flavour}: {f.message} ({names})",
            f.remediation,
            srcs + f.sources,
            reason=f.reason,
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
