"""Parsers of the container toolkit and its CDI specs: `nvidia-ctk --version`, the NVIDIA CDI
spec (devices, host paths, the driver it was generated for), `ls` of the spec dirs and of the
paths a spec names (pure)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

import yaml

from builder.facts.driver_version import DriverVersion
from builder.host.parsers.safe_yaml import safe_load_yaml
from builder.host.shown import shown


def ctk_version(text: str) -> str | None:
    """`nvidia-ctk --version`: "NVIDIA Container Toolkit CLI version 1.17.8\\ncommit: ..."."""
    m = re.search(r"version\s+v?(\d+\.\d+\.\d+(?:[-~][\w.]+)?)", text)
    return m[1] if m else None


_VERSIONED_LIB = re.compile(
    r"lib(?:cuda|nvidia-ml|nvidia-ptxjitcompiler)\.so\.(\d+\.\d+(?:\.\d+)?)$"
)


@dataclass(frozen=True)
class CdiSpec:
    path: str
    kind: str
    cdi_version: str
    devices: tuple[str, ...]
    host_paths: tuple[str, ...]
    driver_version: DriverVersion | None  # the driver the spec was generated for
    # the versioned spec fields it uses, named as builder.facts.cdi_versions.SPEC_VERSIONS does
    fields_used: tuple[str, ...] = ()


def _fields_used(doc: dict[str, Any], edits: list[dict[str, Any]]) -> tuple[str, ...]:
    """The fields (and name forms) a CDI library version-gates, as its requiresV0x0 functions
    test them (container-device-interface specs-go/version.go)."""
    used: list[str] = []
    devices = [d for d in doc.get("devices") or [] if isinstance(d, dict)]
    if any(isinstance(m, dict) and m.get("type") for e in edits for m in e.get("mounts") or []):
        used.append("mounts[].type")
    if any(
        isinstance(n, dict) and n.get("hostPath") for e in edits for n in e.get("deviceNodes") or []
    ):
        used.append("deviceNodes[].hostPath")
    if any(str(d.get("name", ""))[:1].isdigit() for d in devices):
        used.append("a device name starting with a digit")
    if doc.get("annotations"):
        used.append("annotations")
    if any(d.get("annotations") for d in devices):
        used.append("devices[].annotations")
    if "." in str(doc.get("kind", "")).partition("/")[2]:
        used.append("a '.' in the kind's class")
    rdt = [e["intelRdt"] for e in edits if e.get("intelRdt") is not None]
    if rdt:
        used.append("intelRdt")
    if any(e.get("additionalGids") for e in edits):
        used.append("additionalGids")
    if any(e.get("netDevices") for e in edits):
        used.append("netDevices")
    if any(isinstance(r, dict) and r.get("schemata") is not None for r in rdt):
        used.append("intelRdt.schemata")
    if any(isinstance(r, dict) and r.get("enableMonitoring") for r in rdt):
        used.append("intelRdt.enableMonitoring")
    return tuple(used)


def cdi_spec(path: str, text: str) -> CdiSpec | str:
    """A CDI spec (YAML or JSON): kind, devices[].name, and every host path its container edits
    name (deviceNodes path/hostPath, mounts hostPath, hooks path). The driver it was generated
    for comes from the enable-cuda-compat hook's --host-driver-version, else from the version
    suffix of libcuda/libnvidia-ml. Returns an error string when it does not parse."""
    try:
        doc = safe_load_yaml(text)
    except yaml.YAMLError as exc:
        return f"{path} does not parse as YAML/JSON: {shown(str(exc).splitlines()[0], 200)}"
    if not isinstance(doc, dict) or "kind" not in doc:
        return f"{path} is not a CDI spec (no `kind`)"
    edits: list[dict[str, Any]] = []
    if isinstance(doc.get("containerEdits"), dict):
        edits.append(doc["containerEdits"])
    devices = []
    if not isinstance(doc.get("devices") or [], list):
        return f"{path}: `devices` is not a list (not a valid CDI spec)"
    for dev in doc.get("devices") or []:
        if isinstance(dev, dict):
            devices.append(str(dev.get("name", "")))
            if isinstance(dev.get("containerEdits"), dict):
                edits.append(dev["containerEdits"])
    paths: list[str] = []
    hook_driver = None
    for e in edits:
        for field_name in ("deviceNodes", "mounts", "hooks"):
            if not isinstance(e.get(field_name) or [], list):
                return f"{path}: containerEdits.{field_name} is not a list (not a valid CDI spec)"
        for node in e.get("deviceNodes") or []:
            if isinstance(node, dict):
                paths.append(str(node.get("hostPath") or node.get("path") or ""))
        for mount in e.get("mounts") or []:
            if isinstance(mount, dict) and mount.get("hostPath"):
                paths.append(str(mount["hostPath"]))
        for n, hook in enumerate(e.get("hooks") or []):
            if not isinstance(hook, dict):
                continue
            if hook.get("path"):
                paths.append(str(hook["path"]))
            args = hook.get("args") or []
            if not isinstance(args, list):
                return (
                    f"{path}: hooks[{n}].args is {shown(args)}, not a list of strings "
                    "(not a valid CDI spec: podman refuses it)"
                )
            for arg in args:
                m = re.fullmatch(r"--host-driver-version=(\S+)", str(arg))
                if m:
                    hook_driver = m[1]
    versions = Counter(m[1] for p in paths if (m := _VERSIONED_LIB.search(p)))
    driver = DriverVersion.parse(
        hook_driver or (versions.most_common(1)[0][0] if versions else None)
    )
    unique = tuple(dict.fromkeys(p for p in paths if p.startswith("/")))
    return CdiSpec(
        path,
        str(doc["kind"]),
        str(doc.get("cdiVersion", "")),
        tuple(devices),
        unique,
        driver,
        _fields_used(doc, edits),
    )


def ls_dirs(text: str, dirs: list[str]) -> dict[str, list[str]]:
    """`ls -1 -- DIR...` with several operands: a "DIR:" header, then one name a line, blank
    lines between directories (GNU ls sorts the operands; missing ones go to stderr)."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.endswith(":") and line[:-1] in dirs:
            current = out.setdefault(line[:-1], [])
        elif line.strip() and current is not None:
            current.append(line.strip())
    return out


def existing_paths(text: str) -> set[str]:
    """`ls -1d -- PATH...`: the paths that exist are printed, one per line (errors go to stderr)."""
    return {line.strip() for line in text.splitlines() if line.strip()}
