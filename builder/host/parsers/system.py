"""Parsers of the OS and its services: /etc/os-release, grubby, systemctl show, getenforce,
`nv-fabricmanager --version` and `df -P -k` (pure: text in, typed facts out)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from builder.facts.driver_version import DriverVersion


@dataclass(frozen=True)
class OsRelease:
    id: str
    version_id: str
    pretty_name: str
    id_like: str = ""


def os_release(text: str) -> OsRelease | None:
    """os-release(5): KEY=value lines, values optionally shell-quoted."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, raw = line.partition("=")
        try:
            words = shlex.split(raw)
        except ValueError:
            words = [raw.strip("\"'")]
        values[key.strip()] = words[0] if words else ""
    if "ID" not in values:
        return None
    return OsRelease(
        values["ID"].lower(),
        values.get("VERSION_ID", ""),
        values.get("PRETTY_NAME", values.get("NAME", values["ID"])),
        values.get("ID_LIKE", ""),
    )


def fm_version(text: str) -> DriverVersion | None:
    """`nv-fabricmanager --version`: "Fabric Manager version is : 535.161.08"."""
    m = re.search(r"Fabric Manager version is\s*:\s*(\S+)", text)
    return DriverVersion.parse(m[1]) if m else None


def getenforce(text: str) -> str | None:
    word = text.strip().split()[0] if text.strip() else ""
    return word if word in ("Enforcing", "Permissive", "Disabled") else None


def systemctl_show(text: str) -> dict[str, tuple[str, str]]:
    """`systemctl show --property=Id,LoadState,ActiveState,UnitFileState UNIT...`: one block of
    Key=Value lines per unit, blocks separated by a blank line, properties in systemd's order.
    Returns unit (".service" dropped) -> (ActiveState, UnitFileState); a unit systemd does not
    know (LoadState=not-found) gets UnitFileState "not-found"."""
    units: dict[str, tuple[str, str]] = {}
    for block in re.split(r"\n\s*\n", text.strip()):
        props = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        unit = props.get("Id", "").removesuffix(".service")
        if not unit:
            continue
        enabled = (
            "not-found" if props.get("LoadState") == "not-found" else props.get("UnitFileState", "")
        )
        units[unit] = (props.get("ActiveState", ""), enabled)
    return units


def grubby_default(text: str) -> str | None:
    """`grubby --default-kernel`: "/boot/vmlinuz-5.14.0-503.11.1.el9_5.x86_64"."""
    m = re.search(r"vmlinuz-(\S+)", text)
    return m[1] if m else None


@dataclass(frozen=True)
class DiskFree:
    path: str
    mount: str
    avail_kb: int


def df_p(path: str, text: str) -> DiskFree | None:
    """`df -P -k PATH`: a header, then "Filesystem 1024-blocks Used Available Capacity Mounted"."""
    lines = text.strip().splitlines()
    if len(lines) < 2:
        return None
    parts = lines[-1].split()
    if len(parts) < 6 or not parts[3].isdigit():
        return None
    return DiskFree(path, parts[-1], int(parts[3]))


def graphroot(storage_conf: str) -> str | None:
    """containers-storage.conf(5) `graphroot = "/path"` of its [storage] table."""
    section = ""
    for raw in storage_conf.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("["):
            section = line.strip("[]").strip()
            continue
        key, sep, value = line.partition("=")
        if sep and section == "storage" and key.strip() == "graphroot":
            path = value.strip().strip('"').strip("'")
            return path if path.startswith("/") else None
    return None
