"""YAML with line numbers: a plain tree plus a map from key path to source line.

PyYAML's composer keeps marks on nodes; this walks them once. Numbers stay as their source text
(`python: 3.10` must not become 3.1), duplicate keys are errors instead of silently winning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from builder.errors import MatrixError

Tree = dict[str, Any] | list[Any] | str | bool | None


def keypath_join(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


def read_text(path: Path, what: str) -> str:
    """The file's text; a missing or unreadable file is a MatrixError naming it (`what`: what
    was expected there)."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MatrixError(str(path), f"no such file (expected {what} here)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise MatrixError(str(path), f"cannot read: {exc}") from None


# libyaml's composer when PyYAML has it (matrix.yaml: ~1 ms instead of ~55 ms); its nodes carry
# the same marks. Its error texts differ from PyYAML's, so a document it refuses is composed
# again by the pure-Python loader, whose message and line are the ones shown.
_FAST_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _compose(text: str) -> yaml.Node | None:
    try:
        return yaml.compose(text, Loader=_FAST_LOADER)
    except yaml.YAMLError:
        if _FAST_LOADER is yaml.SafeLoader:
            raise
    return yaml.compose(text, Loader=yaml.SafeLoader)


def safe_load(text: str) -> Any:
    """yaml.safe_load through libyaml where PyYAML has it; a document libyaml refuses is loaded
    again by PyYAML's own loader, so an error (and its message) is always PyYAML's."""
    try:
        return yaml.load(text, Loader=_FAST_LOADER)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError:
        if _FAST_LOADER is yaml.SafeLoader:
            raise
    return yaml.safe_load(text)


def load(text: str, path: str) -> tuple[Tree, dict[str, int]]:
    try:
        node = _compose(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = exc.problem or exc.context or "invalid YAML"
        raise MatrixError(path, f"YAML syntax error: {problem}", line=line) from None
    except yaml.YAMLError as exc:  # pragma: no cover - reader errors (bad bytes)
        raise MatrixError(path, f"YAML error: {exc}") from None
    if node is None:
        raise MatrixError(path, "the file is empty: expected a mapping with schema, project, ...")
    lines: dict[str, int] = {}
    return _convert(node, "", lines, path), lines


_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_TRUE = frozenset({"yes", "true", "on"})


def _convert(node: yaml.Node, keypath: str, lines: dict[str, int], path: str) -> Tree:
    lines[keypath] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise MatrixError(
                    path,
                    "mapping keys must be plain scalars",
                    keypath or "<top>",
                    key_node.start_mark.line + 1,
                )
            key = str(key_node.value)
            child = keypath_join(keypath, key)
            if key in out:
                raise MatrixError(
                    path, f"duplicate key {key!r}", child, key_node.start_mark.line + 1
                )
            out[key] = _convert(value_node, child, lines, path)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [
            _convert(v, keypath_join(keypath, i), lines, path) for i, v in enumerate(node.value)
        ]
    assert isinstance(node, yaml.ScalarNode)
    if node.tag == _BOOL:  # the YAML 1.1 booleans the resolver tagged: yes/no, true/false, on/off
        return node.value.lower() in _TRUE
    if node.tag == _NULL:
        return None
    return str(node.value)
