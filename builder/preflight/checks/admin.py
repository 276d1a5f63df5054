"""The checks an admin runs by hand before unloading an NVIDIA driver (pure): modules that pin
the driver, MIG instances that do not survive the reload, GPU memory errors pending a reset,
Xid errors, a runfile install, dnf pins. The facts (module names, sources) live in
builder.facts.host."""

from __future__ import annotations

import datetime as dt

from builder.facts import host as host_rules
from builder.judgement.finding import Finding
from builder.judgement.registry import check
from builder.judgement.severity import BLOCK, OK, SKIP, WARN
from builder.preflight.host_state import HostState
from builder.preflight.model import UpgradePlan


@check("driver.dependents", "host", reads=("driver",))
def driver_dependents(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Which modules pin the loaded nvidia module (the unload fails while they load)?"""
    srcs = (host_rules.DRIVER_DEPENDENT_SOURCE,)
    if state.modules is None:
        out = state.out("proc-modules")
        why = out.why() if out is not None else "not read"
        return Finding(cid, SKIP, f"cannot read /proc/modules ({why})", "", srcs)
    if "nvidia" not in state.modules:
        return Finding(cid, SKIP, "the nvidia module is not loaded: nothing pins it", "", srcs)
    users = set(state.modules["nvidia"][1])
    known = [m for m in host_rules.DRIVER_DEPENDENT_MODULES if m in state.modules]
    other = sorted(
        u
        for u in users
        if u not in host_rules.NVIDIA_STACK_MODULES and u not in host_rules.DRIVER_DEPENDENT_MODULES
    )
    if not known and not other:
        return Finding(cid, OK, "only NVIDIA's own modules use the nvidia module", "", srcs)
    parts = [f"{m}: {host_rules.DRIVER_DEPENDENT_MODULES[m]}" for m in known]
    parts += [f"{m}: uses the nvidia module (not one preflight knows)" for m in other]
    return Finding(
        cid,
        WARN,
        "modules pin the loaded driver, the upgrade cannot unload it while they are loaded: "
        + "; ".join(parts),
        "stop their users and `modprobe -r` them before the upgrade; reinstall the out-of-tree "
        "ones for the new driver",
        srcs,
    )


@check("gpu.mig", "host", reads=("driver",))
def gpu_mig(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Which GPUs have MIG instances the driver reload destroys?"""
    srcs = (host_rules.MIG_SOURCE,)
    gpus = state.smi_q.gpus if state.smi_q else ()
    if not gpus:
        return Finding(cid, SKIP, "no `nvidia-smi -q` GPU data", "", srcs)
    enabled = [g for g in gpus if g.mig_current.lower() == "enabled"]
    pending = [g for g in gpus if g.mig_pending and g.mig_pending != g.mig_current]
    notes = []
    if pending:
        notes.append(
            f"{len(pending)} GPU(s) have a MIG mode change pending (applied at the next reset): "
            + ", ".join(f"{g.bus_id} {g.mig_current}->{g.mig_pending}" for g in pending[:4])
        )
        # the upgrade's driver reload resets the GPUs, which applies the change: the plan
        # turns MIG on (or off) under every job sized for the GPU as it is (breaks, kind.py)
        return Finding(
            cid,
            BLOCK if plan.target is not None else WARN,
            "; ".join(notes)
            + ("; the upgrade's GPU reset applies it" if plan.target is not None else ""),
            "apply it on purpose before the upgrade (drain, `nvidia-smi -i <gpu> -r`) or undo "
            "it (`nvidia-smi -i <gpu> -mig <current mode>`), then rerun preflight",
            srcs,
        )
    if not enabled:
        return Finding(cid, OK, "; ".join(["MIG is disabled on every GPU", *notes]), "", srcs)
    text = (
        f"MIG is enabled on {len(enabled)} of {len(gpus)} GPU(s) ("
        + ", ".join(g.bus_id for g in enabled[:4])
        + (", ..." if len(enabled) > 4 else "")
        + "): GPU and compute instances do not survive the driver reload and must be recreated"
    )
    return Finding(
        cid,
        WARN if plan.target is not None else OK,
        "; ".join([text, *notes]),
        "after the upgrade recreate the instances from the site's config "
        "(e.g. nvidia-mig-parted apply -f <config> -c <profile>)",
        srcs,
    )


@check("gpu.memory", "host", reads=("driver",))
def gpu_memory(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Are memory repairs pending (applied by the reload) or failed?"""
    srcs = (host_rules.MEMORY_ERRORS_SOURCE,)
    gpus = state.smi_q.gpus if state.smi_q else ()
    if not gpus:
        return Finding(cid, SKIP, "no `nvidia-smi -q` GPU data", "", srcs)
    failed = [g for g in gpus if g.remap_failure.lower() == "yes"]
    pending = [
        g for g in gpus if g.remap_pending.lower() == "yes" or g.retired_pending.lower() == "yes"
    ]
    if failed:
        return Finding(
            cid,
            BLOCK,
            f"row remapping failed on {', '.join(g.bus_id for g in failed)}: the GPU's memory "
            "cannot be repaired in place",
            "take the GPU out of service: run DCGM diagnostics (dcgmi diag -r 3) and RMA it",
            srcs,
        )
    if pending:
        return Finding(
            cid,
            WARN,
            f"{len(pending)} GPU(s) have page retirement or row remapping pending "
            f"({', '.join(g.bus_id for g in pending[:4])}): applied at the next GPU reset, "
            "which the driver reload performs",
            "expect it to be applied by the upgrade; check `nvidia-smi -q -d ROW_REMAPPER` after",
            srcs,
        )
    return Finding(cid, OK, "no pending page retirement or row remapping", "", srcs)


@check("gpu.xid", "host", reads=("admin",))
def gpu_xid(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Which Xid errors did this boot log (hardware faults survive an upgrade)?"""
    srcs = (host_rules.XID_SOURCE,)
    if state.xids is None:
        out = state.out("xid")
        why = out.why() if out is not None else "not asked"
        return Finding(cid, SKIP, f"cannot read this boot's kernel log ({why})", "", srcs)
    if not state.xids:
        return Finding(cid, OK, "no Xid error in this boot's kernel log", "", srcs)
    by_code: dict[int, list[str]] = {}
    for x in state.xids:
        by_code.setdefault(x.code, []).append(x.bus)
    hardware = {c: b for c, b in by_code.items() if c in host_rules.XID_HARDWARE}
    lost = sorted(set(by_code.get(host_rules.XID_GPU_LOST, ())))
    parts = [
        f"Xid {c} x{len(b)} on {', '.join(sorted(set(b))[:3])}"
        + (f" ({host_rules.XID_HARDWARE[c]})" if c in host_rules.XID_HARDWARE else "")
        for c, b in sorted(by_code.items())
    ]
    if lost:  # gone until a reboot, with or without a plan (broken now, kind.py)
        return Finding(
            cid,
            BLOCK,
            f"a GPU fell off the bus this boot ({', '.join(lost[:4])}): it is gone until the host "
            f"is rebooted; {len(state.xids)} Xid event(s): " + "; ".join(parts),
            "reboot the host, run DCGM diagnostics (dcgmi diag -r 3) and check the GPU's power, "
            "cooling and seating before any driver change: a driver upgrade does not fix it",
            (*srcs, host_rules.GPU_LOST_SOURCE),
        )
    return Finding(
        cid,
        WARN,
        f"{len(state.xids)} Xid event(s) this boot: " + "; ".join(parts),
        (
            "hardware or fabric faults: a driver upgrade does not fix them; run DCGM "
            "diagnostics (dcgmi diag -r 3) and check the GPU before the upgrade"
        )
        if hardware
        else "look the codes up in NVIDIA's Xid catalogue before the upgrade",
        srcs,
    )


@check("driver.runfile", "host", reads=("admin", "packages"))
def driver_runfile(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Is there a runfile install that a package install would fight?"""
    srcs = (host_rules.RUNFILE_SOURCE,)
    if not state.runfile:
        return Finding(cid, OK, "no runfile install found (no nvidia-uninstall)", "", srcs)
    packaged = bool(state.rpm and state.rpm.installed.get("nvidia-driver"))
    return Finding(
        cid,
        WARN,
        f"a runfile install is present ({', '.join(state.runfile)})"
        + (
            "; the driver is also installed from packages: the two overwrite each other"
            if packaged
            else ""
        ),
        "remove it with `nvidia-uninstall` before installing or upgrading the driver from packages",
        srcs,
    )


@check("packages.pins", "host", reads=("admin",))
def package_pins(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Do dnf versionlock or exclude= hold NVIDIA packages back?"""
    srcs = (host_rules.DNF_PINS_SOURCE,)
    if state.dnf_pins is None:
        return Finding(cid, SKIP, "not an EL host: dnf pins are not checked", "", srcs)
    if not state.dnf_pins:
        return Finding(cid, OK, "no dnf versionlock or exclude holds NVIDIA packages", "", srcs)
    return Finding(
        cid,
        WARN if plan.target is None else BLOCK,
        "NVIDIA packages are pinned: "
        + "; ".join(state.dnf_pins[:6])
        + (f" and {len(state.dnf_pins) - 6} more" if len(state.dnf_pins) > 6 else ""),
        "dnf versionlock delete the NVIDIA entries (or drop them from exclude=) for the upgrade, "
        "and pin the new version after it",
        srcs,
    )
