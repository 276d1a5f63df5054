"""Host checks of what loads or serves the driver (pure): Secure Boot and the DKMS signing key,
nouveau, nvidia-persistenced and the fabric manager."""

from __future__ import annotations

import datetime as dt

from builder.facts import host as host_rules
from builder.facts.driver_version import DriverVersion
from builder.judgement.finding import Finding
from builder.judgement.registry import check
from builder.judgement.severity import BLOCK, OK, SKIP, WARN, Severity
from builder.preflight.checks.common import (
    has_nvidia,
    package_command,
)
from builder.preflight.host_state import HostState
from builder.preflight.model import UpgradePlan


@check("secureboot.mok", "host", reads=("dkms",))
def secure_boot(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Under Secure Boot, will the firmware accept the modules DKMS signs?"""
    srcs = (host_rules.DKMS_MOK_SOURCE, host_rules.SECURE_BOOT_REJECT_SOURCE)
    out = state.out("sb-state")
    if state.secure_boot is None:
        why = out.why() if out is not None and not out.ok else "unrecognised output"
        if not has_nvidia(state, plan):
            return Finding(
                cid, SKIP, f"Secure Boot state unknown ({why}); no NVIDIA driver to load"
            )
        return Finding(
            cid,
            WARN,
            f"cannot tell whether Secure Boot is on ({why})",
            package_command(state, "install", "mokutil") + ", then rerun",
            srcs,
        )
    if state.secure_boot == "unsupported":
        return Finding(cid, OK, "no Secure Boot (legacy BIOS or no EFI variables)", "", srcs)
    if state.secure_boot == "disabled":
        return Finding(cid, OK, "Secure Boot is disabled: unsigned modules load", "", srcs)
    dkms = state.out("dkms")
    uses_dkms = dkms is not None and dkms.ok
    if not uses_dkms:
        return Finding(
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
        return Finding(
            cid,
            BLOCK,
            f"Secure Boot is enabled and DKMS has no signing key at "
            f"{host_rules.DKMS_MOK_CERT} yet: the key it makes at the next build is not "
            f"enrolled, so the new module will not load{enrolled}",
            "create the key first (dkms generate_mok) and " + fix,
            srcs,
        )
    if state.mok_test == "not-enrolled":
        return Finding(
            cid,
            BLOCK,
            f"Secure Boot is enabled and the DKMS signing key "
            f"{host_rules.DKMS_MOK_CERT} is not enrolled: DKMS-built modules will not "
            f"load{enrolled}",
            fix,
            srcs,
        )
    if state.mok_test == "pending":
        return Finding(
            cid,
            WARN,
            f"the DKMS key {host_rules.DKMS_MOK_CERT} awaits enrolment at the next boot",
            "reboot and confirm the key in MokManager before the upgrade",
            srcs,
        )
    if state.mok_test == "enrolled":
        return Finding(
            cid,
            OK,
            f"Secure Boot is enabled and the DKMS key {host_rules.DKMS_MOK_CERT} is enrolled",
            "",
            srcs,
        )
    test = state.out("mok-test")
    why = test.why() if test is not None and not test.ok else "unrecognised output"
    return Finding(cid, WARN, f"cannot tell whether the DKMS key is enrolled ({why})", fix, srcs)


@check("nouveau", "host", reads=("nouveau",))
def nouveau(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Is nouveau kept off the GPUs (not loaded, and blacklisted)?"""
    srcs = (host_rules.NOUVEAU_SOURCE,)
    if not has_nvidia(state, plan):
        return Finding(cid, SKIP, "no NVIDIA GPU or driver here", "", srcs)
    fix = (
        "write /etc/modprobe.d/blacklist-nouveau.conf with `blacklist nouveau` and `options "
        "nouveau modeset=0`, run `dracut --force` and reboot"
    )
    if state.lsmod is None:
        out = state.out("lsmod")
        return Finding(
            cid, WARN, f"cannot list loaded modules ({out.why() if out else '?'})", fix, srcs
        )
    if "nouveau" in state.lsmod:
        return Finding(
            cid, BLOCK, "nouveau is loaded: the nvidia module cannot take the GPUs", fix, srcs
        )
    if not state.blacklist.blacklisted:
        return Finding(
            cid,
            WARN,
            "nouveau is not loaded but not blacklisted either: a kernel or "
            "initramfs update can bring it back",
            fix,
            srcs,
        )
    return Finding(
        cid,
        OK,
        f"nouveau is not loaded and is blacklisted ({', '.join(state.blacklist.where)}"
        + ("; modeset=0" if state.blacklist.modeset0 else "")
        + ")",
        "",
        srcs,
    )


@check("persistenced", "host", reads=("services", "gpus"))
def persistenced(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Is nvidia-persistenced active and enabled (data center GPUs)?"""
    srcs = (host_rules.PERSISTENCED_SOURCE,)
    unit = host_rules.PERSISTENCED_UNIT
    if not state.gpus:
        return Finding(cid, SKIP, "no GPU visible", "", srcs)
    if not any(g.source == "nvml" for g in state.gpus):
        return Finding(cid, SKIP, "NVML lists no GPU: nothing for the daemon to hold", "", srcs)
    if unit not in state.units:
        out = state.out("systemctl")
        why = out.why() if out is not None and not out.ok else "no answer for the unit"
        return Finding(cid, WARN, f"cannot ask systemd about {unit} ({why})", "", srcs)
    active, enabled = state.units[unit]
    datacenter = any(g.datacenter for g in state.gpus)
    fix = f"systemctl enable --now {unit}"
    if active == "active" and enabled == "enabled":
        return Finding(cid, OK, f"{unit} is active and enabled", "", srcs)
    now = "not installed" if enabled == "not-found" else f"{active or '?'} and {enabled or '?'}"
    return Finding(
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


@check("fabricmanager", "host", reads=("services", "packages"))
def fabricmanager(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """On NVSwitch systems, are the fabric manager and libnvidia-nscq the driver's exact
    version, and is the service running?"""
    srcs = (host_rules.FABRICMANAGER_SOURCE,)
    unit = host_rules.FABRICMANAGER_UNIT
    rpm_fm = [
        v
        for name in host_rules.FABRICMANAGER_PACKAGES
        for v in (state.rpm.installed.get(name, ()) if state.rpm else ())
    ]
    if not _nvswitch(state) and not state.fm_version and not rpm_fm:
        return Finding(
            cid,
            SKIP,
            "no NVSwitch fabric (no fabric state in NVML, no NVSwitch on "
            "PCI) and no fabric manager installed",
            "",
            srcs,
        )
    fm = state.fm_version or (DriverVersion.parse(rpm_fm[0].split("-")[0]) if rpm_fm else None)
    driver = state.next_driver
    pkgs, after = _fm_install(plan, driver)
    if fm is None:
        return Finding(
            cid,
            BLOCK,
            "NVSwitch system without the fabric manager: CUDA cannot use the fabric",
            f"dnf install {pkgs} && systemctl enable --now {unit}",
            srcs,
        )
    # In the plan's verdict the fabric manager is replaced with the driver (the fix says so):
    # what is wrong with the one installed now is a warning there, not a block.
    planned = BLOCK if plan.target is None else WARN
    if driver and str(fm) != str(driver):
        return Finding(
            cid,
            planned,
            f"fabric manager {fm} != driver {driver}: it must be exactly the "
            "driver's version (it refuses to start otherwise)",
            f"dnf install {pkgs}"
            + (" with the driver, in the same transaction" if plan.target else "")
            + f", then systemctl restart {unit}",
            srcs,
        )
    nscq = _nscq_mismatch(state, driver)
    if nscq:
        return Finding(
            cid,
            planned,
            f"{nscq} != driver {driver}: libnvidia-nscq must be the driver's version too",
            f"dnf install {pkgs}"
            + (" with the driver, in the same transaction" if plan.target else ""),
            srcs,
        )
    # A failed service of the driver's own version on a driver that works (nvidia-smi answers)
    # is a fabric fault nothing in a driver change explains or fixes: it blocks the plan too
    # (broken now, builder/judgement/kind.py). Failed beside a driver that does not work, it is
    # the driver's fault, which the plan replaces.
    smi = state.out("smi")
    failed = state.units.get(unit, ("", ""))[0] == "failed" and smi is not None and smi.ok
    return _fm_service(cid, state, fm, driver, BLOCK if failed else planned, after)


def _fm_install(plan: UpgradePlan, driver: DriverVersion | None) -> tuple[str, str]:
    """The packages of the fabric manager for the driver the plan leaves (`dnf install` args),
    and what to say about upgrading it with the driver ("" without a target)."""
    want = plan.target or driver
    branch = want.major if want is not None else "<branch>"
    pkgs = (
        f"{host_rules.FABRICMANAGER_PACKAGE}-{want or '<driver>'} "
        f"libnvidia-nscq-{branch}-{want or '<driver>'}"
    )
    after = (
        (
            f"; upgrade it with the driver, in the same transaction, to exactly {plan.target} "
            f"(dnf install {pkgs})"
        )
        if plan.target
        else ""
    )
    return pkgs, after


def _fm_service(
    cid: str,
    state: HostState,
    fm: DriverVersion,
    driver: DriverVersion | None,
    planned: Severity,
    after: str,
) -> Finding:
    """A fabric manager of the driver's version: is its service running (or will it start at
    the pending reboot)?"""
    srcs = (host_rules.FABRICMANAGER_SOURCE,)
    unit = host_rules.FABRICMANAGER_UNIT
    active, enabled = state.units.get(unit, ("unknown", "unknown"))
    if active != "active":
        active = "not installed as a service" if enabled == "not-found" else active
        pending = state.reboot_pending and enabled == "enabled"
        return Finding(
            cid,
            WARN if pending else planned,
            f"fabric manager {fm} is installed but {unit} is {active}"
            + (
                f"; it is enabled and matches {driver}, the driver after the pending reboot"
                if pending
                else ""
            ),
            "reboot (it starts with the matching module)"
            if pending
            else f"read `journalctl -u {unit} -b` (NVSwitch or fabric errors), fix the cause and "
            f"`systemctl restart {unit}` before the driver change, which does not restart it"
            if active == "failed"
            else f"systemctl enable --now {unit}{after}",
            srcs,
        )
    return Finding(
        cid,
        OK,
        f"fabric manager {fm} matches the driver and is active",
        after.removeprefix("; "),
        srcs,
    )


def _nscq_mismatch(state: HostState, driver: DriverVersion | None) -> str:
    """The installed libnvidia-nscq-<branch> package whose version is not the driver's."""
    if driver is None:
        return ""
    for name, versions in sorted(state.nscq.items()):
        for v in versions:
            if v.split("-")[0] != str(driver):
                return f"{name} {v.split('-')[0]}"
    return ""
