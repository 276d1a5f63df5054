"""Host checks of the container stack (pure): nvidia-container-toolkit, the CDI spec, podman's
native CDI and SELinux."""

from __future__ import annotations

import datetime as dt

from builder.facts import host as host_rules
from builder.judgement.finding import Finding
from builder.judgement.registry import check
from builder.judgement.severity import BLOCK, OK, SKIP, WARN
from builder.preflight.checks.common import (
    has_nvidia,
    loose_version,
    package_command,
)
from builder.preflight.host_state import HostState
from builder.preflight.model import UpgradePlan
from builder.preflight.parsers import CdiSpec


@check("toolkit.version", "host", reads=("container",))
def container_toolkit(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Is nvidia-container-toolkit there, and new enough for CDI?"""
    srcs = (host_rules.CDI_MIN_TOOLKIT_SOURCE,)
    ctk = loose_version(state.ctk_version)
    out = state.out("nvidia-ctk")
    if ctk is None:
        why = out.why() if out is not None and not out.ok else "unrecognised version"
        sev = WARN if has_nvidia(state, plan) else SKIP
        return Finding(
            cid,
            sev,
            f"nvidia-container-toolkit: {why}: podman gets no GPU through CDI without it",
            package_command(state, "install", "nvidia-container-toolkit")
            + " (NVIDIA's libnvidia-container repository)",
            srcs,
        )
    if ctk < host_rules.CDI_MIN_TOOLKIT:
        return Finding(
            cid,
            BLOCK,
            f"nvidia-container-toolkit {ctk} predates CDI (needs >= {host_rules.CDI_MIN_TOOLKIT})",
            "upgrade nvidia-container-toolkit",
            srcs,
        )
    if ctk < host_rules.CDI_REFRESH_TOOLKIT:
        return Finding(
            cid,
            OK,
            f"nvidia-container-toolkit {ctk} (>= {host_rules.CDI_MIN_TOOLKIT} "
            f"for CDI; the automatic spec refresh needs {host_rules.CDI_REFRESH_TOOLKIT})",
            "",
            (*srcs, host_rules.CDI_REFRESH_SOURCE),
        )
    return Finding(cid, OK, f"nvidia-container-toolkit {ctk}", "", srcs)


def _priority(path: str) -> int:
    """A spec's CDI priority: its directory's place in CDI_SPEC_DIRS (later wins)."""
    parent = path.rsplit("/", 1)[0]
    dirs = host_rules.CDI_SPEC_DIRS
    return dirs.index(parent) if parent in dirs else -1


def _effective(specs: list[CdiSpec]) -> tuple[list[CdiSpec], list[CdiSpec], list[str]]:
    """(the specs CDI resolves devices from, those shadowed by a higher-priority directory,
    conflicts): the same device kind in /etc/cdi and /var/run/cdi resolves to /var/run/cdi's;
    only the same device name twice at one priority is a conflict (the CDI cache's
    resolveConflict)."""
    by_kind: dict[str, list[CdiSpec]] = {}
    for spec in specs:
        by_kind.setdefault(spec.kind, []).append(spec)
    effective, shadowed, conflicts = [], [], []
    for kind, group in by_kind.items():
        top = max(_priority(sp.path) for sp in group)
        winners = [sp for sp in group if _priority(sp.path) == top]
        effective += winners
        shadowed += [sp for sp in group if _priority(sp.path) != top]
        seen: dict[str, str] = {}
        for sp in winners:
            for dev in sp.devices:
                if dev in seen and seen[dev] != sp.path:
                    conflicts.append(
                        f"{seen[dev]} and {sp.path} both declare {kind}={dev} at the same "
                        "priority (podman refuses conflicting device names)"
                    )
                seen.setdefault(dev, sp.path)
    return effective, shadowed, list(dict.fromkeys(conflicts))


@check("cdi.spec", "host", reads=("cdi", "nouveau"))
def cdi_spec_health(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Does the NVIDIA CDI spec podman resolves match the driver, the GPUs and the files on
    disk?"""
    srcs = (host_rules.CDI_SUPPORT_DOC, host_rules.CDI_STALE_SOURCE)
    refresh = state.units.get(host_rules.CDI_REFRESH_UNIT, ("", ""))
    refreshed = refresh[1] == "enabled"
    if state.cdi_errors and not state.cdi_specs:
        regen = _regen(None, refreshed)
        return Finding(cid, BLOCK, "; ".join(state.cdi_errors), f"regenerate it: {regen}", srcs)
    if not state.cdi_specs:
        regen = _regen(None, refreshed)
        if state.ctk_version is None and not state.gpus:
            return Finding(cid, SKIP, "no CDI spec and no container toolkit", "", srcs)
        return Finding(
            cid,
            WARN,
            f"no NVIDIA CDI spec in {' or '.join(host_rules.CDI_SPEC_DIRS)}: "
            "`podman run --device nvidia.com/gpu=all` fails (unresolvable CDI devices)",
            regen,
            srcs,
        )
    effective, shadowed, conflicts = _effective(state.cdi_specs)
    problems: list[str] = list(conflicts)
    warnings: list[str] = []
    notes: list[str] = []
    nxt = state.next_driver
    for spec in effective:
        missing = state.cdi_missing.get(spec.path, [])
        cleared = spec.path.startswith(host_rules.CDI_RUNTIME_DIR + "/") and state.reboot_pending
        stale = spec.driver_version and nxt and str(spec.driver_version) != str(nxt)
        if cleared and (stale or missing):
            (notes if refreshed else warnings).append(
                f"{spec.path} is for driver {spec.driver_version or '?'}: /var/run is cleared at "
                "the pending reboot"
                + (
                    f", and {host_rules.CDI_REFRESH_UNIT} writes it anew for {nxt}"
                    if refreshed
                    else f"; nothing rewrites it ({host_rules.CDI_REFRESH_UNIT} is not enabled)"
                )
            )
        else:
            if missing:
                problems.append(
                    f"{spec.path}: {len(missing)} of {len(spec.host_paths)} paths do not "
                    f"exist (e.g. {missing[0]})"
                )
            if stale:
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
    for spec in shadowed:
        notes.append(
            f"{spec.path} is shadowed by the same kind in a higher-priority directory "
            "(CDI resolves it from there)"
        )
    regen = _regen(effective[0] if effective else None, refreshed)
    all_srcs = (*srcs, host_rules.CDI_PRIORITY_SOURCE) if shadowed or conflicts else srcs
    if problems:
        return Finding(
            cid, BLOCK, "; ".join(problems + notes), f"regenerate the spec: {regen}", all_srcs
        )
    if warnings:
        return Finding(cid, WARN, "; ".join(warnings + notes), f"after the reboot: {regen}",
                       all_srcs)  # fmt: skip
    if plan.target is not None:
        if refreshed:
            return Finding(
                cid,
                OK,
                "; ".join(notes) + f"; {host_rules.CDI_REFRESH_UNIT} rewrites "
                f"{host_rules.CDI_RUNTIME_DIR}/nvidia.yaml after the upgrade",
                "",
                (*all_srcs, host_rules.CDI_REFRESH_SOURCE),
            )
        return Finding(
            cid,
            WARN,
            "; ".join(notes) + f"; it goes stale when {plan.target} replaces the driver",
            f"after the upgrade (before starting GPU containers): {regen}",
            all_srcs,
        )
    return Finding(cid, OK, "; ".join(notes), "", all_srcs)


def _regen(spec: CdiSpec | None, refreshed: bool) -> str:
    """How to rewrite the spec podman resolves, where it lives (never a second copy)."""
    if refreshed and (spec is None or spec.path.startswith(host_rules.CDI_RUNTIME_DIR + "/")):
        return "systemctl start nvidia-cdi-refresh.service"
    path = spec.path if spec is not None else "/etc/cdi/nvidia.yaml"
    return f"nvidia-ctk cdi generate --output={path}"


@check("podman.version", "host", reads=("container",))
def podman_cdi(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Is podman there, with native CDI?"""
    srcs = (host_rules.PODMAN_CDI_SOURCE,)
    version = loose_version(state.podman_version)
    if version is None:
        out = state.out("podman")
        why = out.why() if out is not None and not out.ok else "unrecognised version"
        return Finding(
            cid,
            WARN,
            f"podman: {why}: the training images cannot run here",
            package_command(state, "install", "podman"),
            srcs,
        )
    if version < host_rules.PODMAN_CDI_MIN:
        return Finding(
            cid,
            BLOCK,
            f"podman {version} has no native CDI (needs >= "
            f"{host_rules.PODMAN_CDI_MIN}): --device nvidia.com/gpu=all fails",
            package_command(state, "upgrade", "podman"),
            srcs,
        )
    return Finding(
        cid, OK, f"podman {version} (native CDI from {host_rules.PODMAN_CDI_MIN})", "", srcs
    )


@check("selinux.mode", "host", reads=("container",))
def selinux_mode(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """What SELinux asks of GPU containers."""
    srcs = (host_rules.SELINUX_SOURCE,)
    if state.selinux is None:
        out = state.out("getenforce")
        why = out.why() if out is not None and not out.ok else "unrecognised output"
        return Finding(cid, SKIP, f"SELinux mode unknown ({why})", "", srcs)
    if state.selinux == "Enforcing":
        return Finding(
            cid,
            OK,
            "SELinux is Enforcing: GPU containers need "
            "`--security-opt=label=disable` (NVIDIA's example) or the "
            "container_use_devices boolean",
            "setsebool -P container_use_devices on (or run with --security-opt=label=disable)",
            srcs,
        )
    return Finding(cid, OK, f"SELinux is {state.selinux}", "", srcs)
