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
from builder.preflight.parsers.safe_yaml import safe_load_yaml
from builder.preflight.shown import shown


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
        path, str(doc["kind"]), str(doc.get("cdiVersion", "")), tuple(devices), unique, driver
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
