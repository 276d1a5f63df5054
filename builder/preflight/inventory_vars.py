"""An inventory's groups and a host's variables as ansible-core merges them (pure): `all`'s,
then those of every group holding the host (its parents' included) by depth, then
ansible_group_priority, then name - a child group beats its parent - then the host's own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class InventoryGroup:
    hosts: dict[str, dict[str, Any]]
    vars: dict[str, Any]
    children: list[str]


def members(groups: dict[str, InventoryGroup], name: str, seen: set[str]) -> list[str]:
    """The hosts of group `name`, its children's included (each group once)."""
    if name in seen or name not in groups:
        return []
    seen.add(name)
    out = list(groups[name].hosts)
    for child in groups[name].children:
        out += members(groups, child, seen)
    return out


def _depths(groups: dict[str, InventoryGroup]) -> dict[str, int]:
    """Each group's depth as ansible-core counts it: `all` 0, a group without a parent 1, a
    child one more than its deepest parent."""
    parents: dict[str, list[str]] = {name: [] for name in groups}
    for name, group in groups.items():
        for child in group.children:
            parents.setdefault(child, []).append(name)

    def depth(name: str, seen: frozenset[str]) -> int:
        if name == "all":
            return 0
        up = [p for p in parents.get(name, []) if p not in seen and p != "all"]
        return 1 + max((depth(p, seen | {name}) for p in up), default=0)

    return {name: depth(name, frozenset()) for name in parents}


def _priority(group: InventoryGroup) -> int:
    value = group.vars.get("ansible_group_priority", 1)
    try:
        return int(value)
    except (TypeError, ValueError):
        return 1


def hostvars(groups: dict[str, InventoryGroup], host: str) -> dict[str, Any]:
    """A host's variables as ansible-core merges them: `all`'s, then those of every group
    holding it (its parents' included) by depth, then ansible_group_priority, then name - a
    child group beats its parent - then the host's own."""
    depths = _depths(groups)
    holding = [
        name
        for name in groups
        if name not in ("all", "_meta") and host in members(groups, name, set())
    ]
    merged: dict[str, Any] = dict(groups.get("all", InventoryGroup({}, {}, [])).vars)
    for name in sorted(holding, key=lambda g: (depths.get(g, 1), _priority(groups[g]), g)):
        merged.update(groups[name].vars)
    meta = groups.get("_meta")
    if meta is not None and isinstance(meta.vars.get(host), dict):
        merged.update(meta.vars[host])
    for group in groups.values():
        merged.update(group.hosts.get(host, {}))
    return merged
