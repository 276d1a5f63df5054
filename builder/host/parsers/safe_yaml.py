"""YAML read the safe way, fast and bounded: CDI specs and recorded hosts (fixture.yaml) are
parsed here, and both are untrusted (a host's file, a record attached to a ticket).

Safe: only the safe subset (no Python objects). Bounded: YAML aliases let a few hundred bytes
stand for millions of nodes (a "billion laughs" document); the composed document is measured
as it would be expanded, and refused past MAX_NODES before anything walks or prints it.
"""

from __future__ import annotations

from typing import Any

import yaml

_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present
MAX_NODES = 200_000  # a generated CDI spec of a 8-GPU host is a few thousand


class YamlTooLarge(yaml.YAMLError):
    """The document expands (through aliases) to more nodes than MAX_NODES."""


def _expanded(node: yaml.Node, memo: dict[int, int], cap: int) -> int:
    """How many nodes `node` stands for once every alias is expanded (memoised: linear in the
    composed graph, however large the expansion)."""
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = 1  # a cycle counts once (the safe constructor builds it as a reference)
    size = 1
    if isinstance(node, yaml.SequenceNode):
        size += sum(_expanded(child, memo, cap) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        size += sum(_expanded(k, memo, cap) + _expanded(v, memo, cap) for k, v in node.value)
    memo[key] = min(size, cap + 1)
    return memo[key]


def safe_load_yaml(text: str, *, max_nodes: int = MAX_NODES) -> Any:
    """yaml.safe_load through libyaml's C loader when PyYAML has it; YamlTooLarge when the
    document stands for more than `max_nodes` nodes."""
    if "&" not in text:  # no anchor, so no alias: nothing can expand
        return yaml.load(text, Loader=_YAML_LOADER)  # noqa: S506 - a SafeLoader
    loader = _YAML_LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = _expanded(node, {}, max_nodes)
        if size > max_nodes:
            raise YamlTooLarge(
                f"the document expands to more than {max_nodes} nodes (YAML aliases): refused"
            )
        return loader.construct_document(node)
    finally:
        loader.dispose()
