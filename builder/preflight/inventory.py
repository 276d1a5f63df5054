"""Ansible inventories -> validated connections, read as ansible-core reads them, without
needing ansible installed (tests/preflight/test_inventory_ansible.py holds it to ansible-core).

Reads the three shapes an inventory file comes in: INI (`[group]`, `[group:vars]`,
`[group:children]`, host lines with key=value variables, `host:port` and `name[01:04]` ranges:
builder/preflight/host_patterns.py), YAML (`all: {hosts, vars, children}`) and the JSON
`ansible-inventory --list` prints (which is how a dynamic inventory reaches preflight:
`ansible-inventory -i dyn.yml --list > hosts.json`). Group variables merge by depth, priority
and name, the host's own last; among the aliases ansible's ssh connection reads, the last one
set wins (ansible_ssh_host over ansible_host, ...). Connection variables become a Connection
(ssh, paramiko, local, podman, docker) whose every field passed a strict pattern, and
ansible_ssh_common_args/_extra_args pass builder/preflight/ssh_args.py.
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
from builder.matrix.yamlnodes import safe_load
from builder.preflight import host_patterns, ssh_args
from builder.preflight.inventory_vars import InventoryGroup, hostvars, members


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
    ssh_args: tuple[str, ...] = ()  # ansible_ssh_common_args + _extra_args, validated

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
# an INI host line that starts with a bracket: an IPv6 address with a port, `[2001:db8::8]:22`
_BRACKETED_V6 = re.compile(r"\[[0-9A-Fa-f]*:[0-9A-Fa-f:.]*\](?::[0-9]+)?")


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


def _hosts_of(where: str, first_word: str) -> tuple[list[str], int | None]:
    """The names (ranges expanded, bounded) and the port of a host pattern."""
    pattern, port = host_patterns.split_port(first_word)
    try:
        return host_patterns.expand_hosts(pattern), port
    except host_patterns.PatternError as exc:
        raise InventoryError(f"{where}: {exc}") from None


def _value(text: str) -> Any:
    try:
        return safe_load(text)
    except yaml.YAMLError:
        return text


def _parse_ini(path: Path, text: str) -> dict[str, InventoryGroup]:
    groups: dict[str, InventoryGroup] = {
        "all": InventoryGroup({}, {}, []),
        "ungrouped": InventoryGroup({}, {}, []),
    }
    section, kind = "ungrouped", "hosts"
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and not _BRACKETED_V6.fullmatch(line.split()[0]):
            m = re.fullmatch(r"\[([A-Za-z0-9_.-]+)(?::(vars|children))?\]", line)
            if m is None:
                raise InventoryError(
                    f"{path}:{n}: not a section header: {line!r} (expected "
                    "[group], [group:vars] or [group:children])"
                )
            section, kind = m[1], m[2] or "hosts"
            groups.setdefault(section, InventoryGroup({}, {}, []))
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
            names, port = _hosts_of(f"{path}:{n}", words[0])
            if port is not None:  # `gpu1:2222` sets ansible_port; a variable given beats it
                hostvars = {"ansible_port": port, **hostvars}
            for host in names:
                group.hosts.setdefault(host, {}).update(hostvars)
    return groups


def _parse_yaml(path: Path, doc: Any) -> dict[str, InventoryGroup]:
    groups: dict[str, InventoryGroup] = {}

    def walk(name: str, node: Any, where: str) -> None:
        if node is None:
            node = {}
        if not isinstance(node, dict):
            raise InventoryError(
                f"{path}: {where}: a group must be a mapping of hosts/vars/children"
            )
        group = groups.setdefault(name, InventoryGroup({}, {}, []))
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
            names, port = _hosts_of(f"{path}: {where}.hosts", str(pattern))
            own = {"ansible_port": port, **(hv or {})} if port is not None else (hv or {})
            for host in names:
                group.hosts.setdefault(host, {}).update(own)
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
        groups.setdefault("_meta", InventoryGroup({}, {}, []))
        for host, hv in meta.items():
            if not isinstance(hv, dict):
                raise InventoryError(
                    f"{path}: _meta.hostvars.{host} must be a mapping of variables, "
                    f"not {type(hv).__name__} {hv!r}"
                )
            groups["_meta"].vars.setdefault(host, hv)
    return groups


def _load(path: Path) -> dict[str, InventoryGroup]:
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
        doc = safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise InventoryError(f"{where}: not YAML: {getattr(exc, 'problem', exc)}") from None
    return _parse_yaml(path, doc)


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
        backend = "paramiko" if conn.startswith("paramiko") else "ssh"
        return _ssh_connection(host, hv, backend, sudo, sudo_user)
    if conn in ("containers.podman.podman", "podman", "community.docker.docker", "docker"):
        name = _shaped("ansible_host", hv.get("ansible_host", host), _CONTAINER, "a container name")
        backend = "podman" if "podman" in conn else "docker"
        return Connection(backend, name, sudo=sudo, sudo_user=sudo_user)
    return None


def _last(hv: dict[str, Any], *keys: str) -> tuple[str, Any]:
    """The variable ansible's ssh connection takes among aliases: the last of `keys` that is
    set (ansible-core's config manager walks an option's variables in order and keeps the last
    one defined: ansible_ssh_user beats ansible_user, at whatever level each was set)."""
    found = ("", None)
    for key in keys:
        if hv.get(key) is not None:
            found = (key, hv[key])
    return found


def _ssh_connection(
    host: str, hv: dict[str, Any], backend: str, sudo: bool, sudo_user: str
) -> Connection:
    addr_key, addr_v = _last(hv, "ansible_host", "ansible_ssh_host")
    address = _address(addr_key or "inventory_hostname", str(addr_v if addr_key else host))
    user_key, user_v = _last(hv, "ansible_user", "ansible_ssh_user")
    user = _shaped(user_key, user_v, _USER, "a user name") if user_v not in (None, "") else ""
    port_key, port_v = _last(hv, "ansible_port", "ansible_ssh_port")
    port = _port(port_key, port_v) if port_key and port_v != "" else None
    key_name, key_v = _last(hv, "ansible_private_key_file", "ansible_ssh_private_key_file")
    key = _shaped(key_name, key_v, _KEY_PATH, "a key file path") if key_v else ""
    args: tuple[str, ...] = ()
    for name in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        if hv.get(name):
            try:
                args += ssh_args.validated(name, str(hv[name]))
            except ssh_args.SshArgError as exc:
                raise _Invalid(str(exc)) from None
    return Connection(backend, address, user, port, key, sudo, sudo_user, args)


def targets(path: str | Path, limit: str | None = None) -> list[Target]:
    """Every host of the inventory (or of the groups/hosts `limit` names, comma-separated)."""
    p = Path(path)
    groups = _load(p)
    every = [h for name in groups if name != "_meta" for h in members(groups, name, set())]
    every = list(dict.fromkeys(every))
    if limit:
        of_group = {n: members(groups, n, set()) for n in groups if n != "_meta"}
        of_group["all"] = every
        try:
            hosts = host_patterns.limit_hosts(limit, of_group, every)
        except host_patterns.PatternError as exc:
            raise InventoryError(f"{p}: {exc}") from None
    else:
        hosts = every
    if not hosts:
        raise InventoryError(
            f"{p}: the inventory lists no hosts" + (f" for --limit {limit!r}" if limit else "")
        )
    return [spec_for(h, hostvars(groups, h)) for h in hosts]
