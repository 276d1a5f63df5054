"""Ansible inventories -> testinfra host specs, without needing ansible installed.

Reads the three shapes an inventory file comes in: INI (`[group]`, `[group:vars]`,
`[group:children]`, host lines with key=value variables and `name[01:04]` ranges), YAML
(`all: {hosts, vars, children}`) and the JSON `ansible-inventory --list` prints (which is how a
dynamic inventory reaches preflight: `ansible-inventory -i dyn.yml --list > hosts.json`).
Connection variables become a spec: ssh://user@host:port (ansible_become -> ?sudo=true,
the private key -> ?ssh_identity_file=), local://, podman://, docker://.
"""

from __future__ import annotations

import ipaddress
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from builder.errors import TrainimgError


class InventoryError(TrainimgError):
    """The inventory does not parse; the message names the file and line."""


@dataclass(frozen=True)
class Connection:
    """An inventory host's connection, every field validated: testinfra gets them as
    arguments (never as URL text, whose query string would become backend options)."""

    backend: str  # ssh | paramiko | local | podman | docker
    host: str = ""  # hostname or IP address; the container name for podman/docker
    user: str = ""
    port: int | None = None
    identity_file: str = ""
    sudo: bool = False
    sudo_user: str = ""

    @property
    def display(self) -> str:
        """A spec-like text for reports (never parsed again)."""
        if self.backend == "local":
            return "local://"
        at = f"{self.user}@" if self.user else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = f":{self.port}" if self.port else ""
        return f"{self.backend}://{at}{host}{port}"


@dataclass(frozen=True)
class Target:
    name: str
    spec: str | None  # None when the host's variables do not give a usable connection
    error: str = ""
    connection: Connection | None = None  # set for inventory hosts (validated fields)
    record: Path | None = None  # set for a recorded host (--from DIR)
    loaded: Any = None  # that record, loaded (and checked) once: builder.preflight.record.Record


# Strict shapes for inventory values (anything else is refused with the key and the value).
_HOSTNAME = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?"
)
_USER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")
_KEY_PATH = re.compile(r"~?/?[A-Za-z0-9_.@+-]+(?:/[A-Za-z0-9_.@+-]+)*")
_CONTAINER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


class _Invalid(ValueError):
    pass


def _address(key: str, value: str) -> str:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        pass
    if _HOSTNAME.fullmatch(value):
        return value
    raise _Invalid(f"{key}={value!r} is not a hostname or an IP address")


def _port(key: str, value: Any) -> int:
    text = str(value)
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= 65535:
        raise _Invalid(f"{key}={text!r} is not a port number (1-65535)")
    return int(text)


def _shaped(key: str, value: Any, pattern: re.Pattern[str], what: str) -> str:
    text = str(value)
    if not pattern.fullmatch(text) or ".." in text.split("/"):
        raise _Invalid(f"{key}={text!r} is not {what}")
    return text


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
            if hv is not None and not isinstance(hv, dict):
                raise InventoryError(
                    f"{path}: {where}.hosts.{pattern} must be a mapping of variables, "
                    f"not {type(hv).__name__} {hv!r}"
                )
            for host in _expand(str(pattern)):
                group.hosts.setdefault(host, {}).update(hv or {})
        gvars = node.get("vars") or {}
        if not isinstance(gvars, dict):
            raise InventoryError(
                f"{path}: {where}.vars must be a mapping of variables, "
                f"not {type(gvars).__name__} {gvars!r}"
            )
        group.vars.update(gvars)
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
            if not isinstance(hv, dict):
                raise InventoryError(
                    f"{path}: _meta.hostvars.{host} must be a mapping of variables, "
                    f"not {type(hv).__name__} {hv!r}"
                )
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
    """The validated connection of one inventory host; a value of the wrong shape makes the
    host unusable (its `host.reach` finding names the key and the value), never a spec."""
    try:
        conn = _connection(host, hv)
    except _Invalid as exc:
        return Target(host, None, f"inventory host {host!r}: {exc}")
    if conn is None:
        return Target(
            host,
            None,
            f"ansible_connection={hv.get('ansible_connection')} is not one preflight can use "
            "(ssh, paramiko, local, podman, docker)",
        )
    return Target(host, conn.display, "", conn)


def _connection(host: str, hv: dict[str, Any]) -> Connection | None:
    conn = str(hv.get("ansible_connection", "ssh"))
    sudo = str(hv.get("ansible_become", "")).lower() in ("true", "yes", "1")
    sudo_user = ""
    if sudo and hv.get("ansible_become_user"):
        sudo_user = _shaped("ansible_become_user", hv["ansible_become_user"], _USER, "a user name")
    if conn == "local":
        return Connection("local", sudo=sudo, sudo_user=sudo_user)
    if conn in ("ssh", "smart", "paramiko", "paramiko_ssh"):
        address = _address("ansible_host", str(hv.get("ansible_host", host)))
        user_v = hv.get("ansible_user") or hv.get("ansible_ssh_user")
        user = _shaped("ansible_user", user_v, _USER, "a user name") if user_v else ""
        port_key = "ansible_port" if hv.get("ansible_port") else "ansible_ssh_port"
        port_v = hv.get(port_key)
        port = _port(port_key, port_v) if port_v not in (None, "") else None
        key_name = (
            "ansible_ssh_private_key_file"
            if hv.get("ansible_ssh_private_key_file")
            else "ansible_private_key_file"
        )
        key_v = hv.get(key_name)
        key = _shaped(key_name, key_v, _KEY_PATH, "a key file path") if key_v else ""
        backend = "paramiko" if conn.startswith("paramiko") else "ssh"
        return Connection(backend, address, user, port, key, sudo, sudo_user)
    if conn in ("containers.podman.podman", "podman", "community.docker.docker", "docker"):
        name = _shaped("ansible_host", hv.get("ansible_host", host), _CONTAINER, "a container name")
        backend = "podman" if "podman" in conn else "docker"
        return Connection(backend, name, sudo=sudo, sudo_user=sudo_user)
    return None


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
