"""Ansible inventories -> testinfra host specs, without needing ansible installed.

Reads the three shapes an inventory file comes in: INI (`[group]`, `[group:vars]`,
`[group:children]`, host lines with key=value variables and `name[01:04]` ranges), YAML
(`all: {hosts, vars, children}`) and the JSON `ansible-inventory --list` prints (which is how a
dynamic inventory reaches preflight: `ansible-inventory -i dyn.yml --list > hosts.json`).
Connection variables become a spec: ssh://user@host:port (ansible_become -> ?sudo=true,
the private key -> ?ssh_identity_file=), local://, podman://, docker://.
"""

from __future__ import annotations

import json
import re
import shlex
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from builder.errors import TrainimgError


class InventoryError(TrainimgError):
    """The inventory does not parse; the message names the file and line."""


@dataclass(frozen=True)
class Target:
    name: str
    spec: str | None  # None when the host's variables do not give a usable connection
    error: str = ""


@dataclass
class _Group:
    hosts: dict[str, dict[str, Any]]
    vars: dict[str, Any]
    children: list[str]


def _expand(pattern: str) -> list[str]:
    """Ansible host ranges: web[01:03] -> web01 web02 web03; db-[a:c] -> db-a db-b db-c."""
    m = re.search(r"\[([0-9a-z]+):([0-9a-z]+)\]", pattern)
    if not m:
        return [pattern]
    lo, hi = m[1], m[2]
    if lo.isdigit() and hi.isdigit():
        width = len(lo) if lo.startswith("0") else 0
        items = [str(i).zfill(width) for i in range(int(lo), int(hi) + 1)]
    else:
        items = [chr(c) for c in range(ord(lo), ord(hi) + 1)]
    return [h for i in items for h in _expand(pattern[: m.start()] + i + pattern[m.end() :])]


def _value(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def _parse_ini(path: Path, text: str) -> dict[str, _Group]:
    groups: dict[str, _Group] = {"all": _Group({}, {}, []), "ungrouped": _Group({}, {}, [])}
    section, kind = "ungrouped", "hosts"
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            m = re.fullmatch(r"\[([A-Za-z0-9_.-]+)(?::(vars|children))?\]", line)
            if m is None:
                raise InventoryError(
                    f"{path}:{n}: not a section header: {line!r} (expected "
                    "[group], [group:vars] or [group:children])"
                )
            section, kind = m[1], m[2] or "hosts"
            groups.setdefault(section, _Group({}, {}, []))
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError as exc:
            raise InventoryError(f"{path}:{n}: {exc}: {line!r}") from None
        group = groups[section]
        if kind == "vars":
            key, sep, value = line.partition("=")
            if not sep:
                raise InventoryError(
                    f"{path}:{n}: expected key=value in [{section}:vars]: {line!r}"
                )
            group.vars[key.strip()] = _value(value.strip())
        elif kind == "children":
            group.children.append(words[0])
        else:
            hostvars: dict[str, Any] = {}
            for word in words[1:]:
                key, sep, value = word.partition("=")
                if not sep:
                    raise InventoryError(
                        f"{path}:{n}: expected key=value after the host name, got {word!r}"
                    )
                hostvars[key] = _value(value)
            for host in _expand(words[0]):
                group.hosts.setdefault(host, {}).update(hostvars)
    return groups


def _parse_yaml(path: Path, doc: Any) -> dict[str, _Group]:
    groups: dict[str, _Group] = {}

    def walk(name: str, node: Any, where: str) -> None:
        if node is None:
            node = {}
        if not isinstance(node, dict):
            raise InventoryError(
                f"{path}: {where}: a group must be a mapping of hosts/vars/children"
            )
        group = groups.setdefault(name, _Group({}, {}, []))
        hosts = node.get("hosts") or {}
        if isinstance(hosts, list):  # the JSON shape: a list of names
            hosts = {h: {} for h in hosts}
        if not isinstance(hosts, dict):
            raise InventoryError(f"{path}: {where}.hosts must be a mapping")
        for pattern, hv in hosts.items():
            for host in _expand(str(pattern)):
                group.hosts.setdefault(host, {}).update(hv or {})
        group.vars.update(node.get("vars") or {})
        children = node.get("children") or {}
        if isinstance(children, list):
            group.children.extend(str(c) for c in children)
            return
        if not isinstance(children, dict):
            raise InventoryError(f"{path}: {where}.children must be a mapping")
        for child, sub in children.items():
            group.children.append(str(child))
            walk(str(child), sub, f"{where}.children.{child}")

    if not isinstance(doc, dict):
        raise InventoryError(f"{path}: the top level must be a mapping of groups")
    meta = doc.get("_meta", {}).get("hostvars", {}) if isinstance(doc.get("_meta"), dict) else {}
    for name, node in doc.items():
        if name == "_meta":
            continue
        if name not in groups or node:
            walk(str(name), node, str(name))
    if meta:  # ansible-inventory --list keeps every host's variables here
        groups.setdefault("_meta", _Group({}, {}, []))
        for host, hv in meta.items():
            groups["_meta"].vars.setdefault(host, hv)
    return groups


def _load(path: Path) -> dict[str, _Group]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise InventoryError(f"{path}: cannot read the inventory ({exc.strerror})") from None
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            return _parse_yaml(path, json.loads(text))
        except json.JSONDecodeError as exc:
            raise InventoryError(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from None
    if re.search(r"^\s*\[[^\]]*\]\s*$", text, re.MULTILINE) or (
        stripped and ":" not in stripped.splitlines()[0]
    ):
        return _parse_ini(path, text)
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise InventoryError(f"{where}: not YAML: {getattr(exc, 'problem', exc)}") from None
    return _parse_yaml(path, doc)


def _members(groups: dict[str, _Group], name: str, seen: set[str]) -> list[str]:
    if name in seen or name not in groups:
        return []
    seen.add(name)
    out = list(groups[name].hosts)
    for child in groups[name].children:
        out += _members(groups, child, seen)
    return out


def _hostvars(groups: dict[str, _Group], host: str) -> dict[str, Any]:
    """A host's variables: all's, then those of each group holding it, then its own."""
    merged: dict[str, Any] = dict(groups.get("all", _Group({}, {}, [])).vars)
    for name, group in groups.items():
        if name in ("all", "_meta"):
            continue
        if host in _members(groups, name, set()):
            merged.update(group.vars)
    meta = groups.get("_meta")
    if meta is not None and isinstance(meta.vars.get(host), dict):
        merged.update(meta.vars[host])
    for group in groups.values():
        merged.update(group.hosts.get(host, {}))
    return merged


def spec_for(host: str, hv: dict[str, Any]) -> Target:
    conn = str(hv.get("ansible_connection", "ssh"))
    address = str(hv.get("ansible_host", host))
    query: dict[str, str] = {}
    if str(hv.get("ansible_become", "")).lower() in ("true", "yes", "1"):
        query["sudo"] = "true"
        if hv.get("ansible_become_user"):
            query["sudo_user"] = str(hv["ansible_become_user"])
    key = hv.get("ansible_ssh_private_key_file") or hv.get("ansible_private_key_file")
    if key:
        query["ssh_identity_file"] = str(key)
    qs = f"?{urllib.parse.urlencode(query)}" if query else ""
    if conn == "local":
        return Target(host, f"local://{qs}")
    if conn in ("ssh", "smart", "paramiko", "paramiko_ssh"):
        user = hv.get("ansible_user") or hv.get("ansible_ssh_user")
        port = hv.get("ansible_port") or hv.get("ansible_ssh_port")
        netloc = f"{urllib.parse.quote(str(user))}@" if user else ""
        netloc += f"[{address}]" if ":" in address else address
        netloc += f":{port}" if port else ""
        scheme = "paramiko" if conn.startswith("paramiko") else "ssh"
        return Target(host, f"{scheme}://{netloc}{qs}")
    if conn in ("containers.podman.podman", "podman"):
        return Target(host, f"podman://{address}{qs}")
    if conn in ("community.docker.docker", "docker"):
        return Target(host, f"docker://{address}{qs}")
    return Target(
        host,
        None,
        f"ansible_connection={conn} is not one preflight can use "
        "(ssh, paramiko, local, podman, docker)",
    )


def targets(path: str | Path, limit: str | None = None) -> list[Target]:
    """Every host of the inventory (or of the groups/hosts `limit` names, comma-separated)."""
    p = Path(path)
    groups = _load(p)
    if limit:
        wanted = [w.strip() for w in limit.split(",") if w.strip()]
        names: list[str] = []
        for w in wanted:
            found = _members(groups, w, set()) or (
                [w] if any(w in g.hosts for g in groups.values()) else []
            )
            if not found:
                raise InventoryError(f"{p}: --limit {w!r} names no group or host of the inventory")
            names += found
    else:
        names = [h for name in groups if name != "_meta" for h in _members(groups, name, set())]
    hosts = list(dict.fromkeys(names))
    if not hosts:
        raise InventoryError(f"{p}: the inventory lists no hosts")
    return [spec_for(h, _hostvars(groups, h)) for h in hosts]
