"""Host checks of the container stack (pure): nvidia-container-toolkit, the CDI spec, podman's
native CDI and SELinux.

Over 400 lines: `cdi.spec` is one finding about the spec podman resolves - its paths, its
driver, the GPUs it lists and whether this podman's CDI library can parse it - so its helpers
stay beside it."""

from __future__ import annotations

import datetime as dt

from packaging.version import Version

from builder.facts import cdi_versions as cdiv
from builder.facts import host as host_rules
from builder.facts.sources import Source
from builder.host.parsers import CdiSpec
from builder.host.shown import shown
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


@check("cdi.spec", "host", reads=("cdi", "nouveau", "container"))
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
    for spec in effective:
        spec_problems, spec_warnings, spec_notes = _spec_findings(spec, state, refreshed)
        problems += spec_problems
        warnings += spec_warnings
        notes += spec_notes
    unparsed = _engine_finding(cid, effective, problems, notes, state, refreshed, srcs)
    if unparsed is not None:
        return unparsed
    upcoming = _regenerated_outruns_podman(state, plan)
    if upcoming:
        warnings.append(upcoming[0])
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
    if upcoming:
        return Finding(
            cid,
            WARN,
            "; ".join(warnings + notes),
            _upgrade_or_no_gids(
                state, effective[0] if effective else None, refreshed, _V070, upcoming[1]
            ),
            (*all_srcs, *_ENGINE_SOURCES, *_engine_sources(state)),
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


def _spec_findings(
    spec: CdiSpec, state: HostState, refreshed: bool
) -> tuple[list[str], list[str], list[str]]:
    """One effective spec's problems, warnings and notes: its paths, its driver (now and after
    a pending reboot, which clears /var/run) and the GPUs it lists."""
    problems: list[str] = []
    warnings: list[str] = []
    notes: list[str] = []
    nxt = state.next_driver
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
        problems.append(f"{spec.path} does not list GPU {unlisted[0].index} ({unlisted[0].uuid})")
    notes.append(
        f"{spec.path} (kind {spec.kind}, {len(spec.devices)} devices, "
        f"{len(spec.host_paths)} paths, driver {spec.driver_version or '?'})"
    )
    return problems, warnings, notes


_ENGINE_SOURCES: tuple[Source, ...] = (
    cdiv.CDI_VERSION_GO,
    cdiv.CDI_SPEC_MD,
    cdiv.TOOLKIT_0_7_0_REPORTS,
    cdiv.DEBIAN12_PODMAN_MEASURED,
    cdiv.TOOLKIT_NO_GIDS_SOURCE,
)
_GIDS = "additionalGids"
_V070 = Version("0.7.0")
_TOOLKIT_0_7_0 = Version("1.19.1")  # the first toolkit that writes CDI 0.7.0 (#1860, #1940)


def _engine_finding(
    cid: str,
    effective: list[CdiSpec],
    problems: list[str],
    notes: list[str],
    state: HostState,
    refreshed: bool,
    srcs: tuple[Source, ...],
) -> Finding | None:
    """The block when the host's podman cannot parse an effective spec (with the spec's other
    problems beside it); None when every spec parses."""
    engine = [_engine_parses(spec, state, refreshed) for spec in effective]
    engine_problems = [e for e in engine if e is not None]
    if not engine_problems:
        return None
    fixes = list(dict.fromkeys(fix for _, fix in engine_problems))
    if problems:
        fixes.append(f"regenerate the spec: {_regen(effective[0], refreshed)}")
    return Finding(
        cid,
        BLOCK,
        "; ".join([*(msg for msg, _ in engine_problems), *problems, *notes]),
        "; ".join(fixes),
        (*srcs, *_ENGINE_SOURCES, *_engine_sources(state)),
    )


# How each engine is asked for a CDI device, for the message when it cannot resolve one
_ENGINE_USE = {
    "podman": "`podman run --device {kind}=...`",
    "docker": "`docker run --device {kind}=...` (dockerd's CDI)",
    "containerd": "a CDI device through containerd (its CRI plugin, `ctr run --device`)",
}


def host_engines(state: HostState) -> list[tuple[str, Version]]:
    """The engines on the host that resolve CDI devices, with their versions: podman, dockerd
    and containerd, each where its version was read and it has CDI at all (ENGINE_CDI)."""
    found = []
    for engine, text in (
        ("podman", state.podman_version),
        ("docker", state.docker_version),
        ("containerd", state.containerd_version),
    ):
        version = loose_version(text)
        if version is not None and cdiv.engine_newest_spec(engine, version) is not None:
            found.append((engine, version))
    return found


def _engine_parses(spec: CdiSpec, state: HostState, refreshed: bool) -> tuple[str, str] | None:
    """(problem, fix) when an engine on the host cannot parse the spec: its `cdiVersion`, or a
    field it uses, is newer than the engine's vendored CDI library knows; or the spec is invalid
    for every CDI library. None when every engine parses it (or none is known)."""
    engines = host_engines(state)
    if not engines:
        return None  # podman.version says what is wrong
    declared = cdiv.spec_version_of(spec.cdi_version)
    if declared is None:
        return (
            f"{spec.path}: cdiVersion {shown(spec.cdi_version)} is no released CDI spec version "
            "(every CDI library refuses it: invalid version)",
            f"regenerate the spec: {_regen(spec, refreshed)}",
        )
    found = [_one_engine(spec, state, refreshed, declared, e, v) for e, v in engines]
    problems = [f for f in found if f is not None]
    if not problems:
        return None
    return "; ".join(p for p, _ in problems), "; ".join(dict.fromkeys(f for _, f in problems))


def _one_engine(
    spec: CdiSpec,
    state: HostState,
    refreshed: bool,
    declared: Version,
    engine: str,
    version: Version,
) -> tuple[str, str] | None:
    """(problem, fix) when this engine release cannot parse the spec; None when it does."""
    row = cdiv.engine_newest_spec(engine, version)
    assert row is not None  # host_engines keeps only engines with CDI
    needs = {f: cdiv.field_version(f) for f in spec.fields_used}
    need = max([declared, *needs.values()])
    if need > declared and row.refuses_older_than_fields:
        return (
            f"{spec.path} says cdiVersion {declared} but uses "
            + ", ".join(f"{f} (CDI {v})" for f, v in needs.items() if v > declared)
            + f": {engine} {version}'s CDI library {row.library} refuses a spec older than its "
            "fields",
            f"regenerate the spec: {_regen(spec, refreshed)}",
        )
    if need <= row.newest_spec:
        return None
    newer = [f"{f} (CDI {v})" for f, v in needs.items() if v > row.newest_spec]
    use = _ENGINE_USE[engine].format(kind=spec.kind)
    return (
        f"{spec.path} is CDI {declared}"
        + (f" (it uses {', '.join(newer)})" if newer else "")
        + f"; {engine} {version} parses CDI specs up to {row.newest_spec} (its CDI library "
        f"{row.library}): {use} fails (unresolvable CDI devices)",
        _upgrade_or_no_gids(state, spec, refreshed, need, engine),
    )


def _upgrade_or_no_gids(
    state: HostState,
    spec: CdiSpec | None,
    refreshed: bool,
    need: Version = _V070,
    engine: str = "podman",
) -> str:
    """Upgrade the engine to one that parses `need`; or, where only `additionalGids` needs
    more than this release parses, regenerate the spec without it."""
    first = cdiv.engine_for_spec(engine, need)
    # dockerd and containerd as Docker's repositories package them (EL and Debian alike)
    package = {"docker": "docker-ce", "containerd": "containerd.io"}.get(engine, engine)
    fixes = [
        f"upgrade {engine} to >= {first.min_version} (it parses CDI {need}): "
        + package_command(state, "upgrade", package)
        if first is not None
        else f"no {engine} release up to {cdiv.NEWEST_READ[engine]} parses CDI {need}"
    ]
    text = {"podman": state.podman_version, "docker": state.docker_version}.get(
        engine, state.containerd_version
    )
    version = loose_version(text)
    row = cdiv.engine_newest_spec(engine, version) if version is not None else None
    others = [cdiv.field_version(f) for f in (spec.fields_used if spec else ()) if f != _GIDS]
    if row is not None and max(others, default=Version("0.3.0")) <= row.newest_spec:
        path = spec.path if spec is not None else "/etc/cdi/nvidia.yaml"
        if refreshed and path.startswith(host_rules.CDI_RUNTIME_DIR + "/"):
            fixes.append(
                f"or leave additionalGids out (nvidia-container-toolkit >= 1.19.1): add "
                f"{cdiv.TOOLKIT_NO_GIDS_ENV} to {cdiv.TOOLKIT_REFRESH_ENV}, then "
                "systemctl start nvidia-cdi-refresh.service"
            )
        else:
            fixes.append(
                "or leave additionalGids out (nvidia-container-toolkit >= 1.19.1): "
                f"nvidia-ctk cdi generate {cdiv.TOOLKIT_NO_GIDS_FLAG} --output={path}"
            )
    return "; ".join(fixes)


def _regenerated_outruns_podman(state: HostState, plan: UpgradePlan) -> tuple[str, str] | None:
    """(warning, engine): a spec every engine parses now is regenerated after the driver
    upgrade by a toolkit that writes CDI 0.7.0 (additionalGids where a device node is not world
    read-writable): a risk when an engine on the host (podman first) parses less."""
    ctk = loose_version(state.ctk_version)
    if plan.target is None or ctk is None or ctk < _TOOLKIT_0_7_0:
        return None
    for engine, version in host_engines(state):
        row = cdiv.engine_newest_spec(engine, version)
        if row is not None and row.newest_spec < _V070:
            return (
                f"nvidia-container-toolkit {ctk} writes CDI 0.7.0 (additionalGids) when it "
                f"regenerates the spec for {plan.target}; {engine} {version} parses CDI up to "
                f"{row.newest_spec}",
                engine,
            )
    return None


def _engine_sources(state: HostState) -> tuple[Source, ...]:
    """The rows' sources of the docker and containerd releases on the host (podman's are in
    _ENGINE_SOURCES)."""
    out: list[Source] = []
    for engine, version in host_engines(state):
        row = cdiv.engine_newest_spec(engine, version)
        if engine != "podman" and row is not None:
            enable = cdiv.DOCKER_CDI_SOURCE if engine == "docker" else cdiv.CONTAINERD_CDI_SOURCE
            out += [*row.sources, enable]
    return tuple(out)


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
