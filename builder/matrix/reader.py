"""Typed access to the YAML tree: each accessor checks one value and names it when it fails."""

from __future__ import annotations

import re
from typing import Any, NoReturn

from builder.errors import MatrixError
from builder.matrix.validate import Pattern
from builder.matrix.yamlnodes import keypath_join

# user:password@ (or a token user@) in a URL: a refused value is shown without it.
_CREDENTIALS = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^/@\s:]*)(?P<pw>:[^/@\s]*)?@"
)


def redact_urls(text: str) -> str:
    """Every URL's password (or token user) in `text` replaced by ***."""

    def hide(m: re.Match[str]) -> str:
        if m.group("pw") is not None:
            return f"{m.group('scheme')}{m.group('user')}:***@"
        return f"{m.group('scheme')}***@"

    return _CREDENTIALS.sub(hide, text)


def _show(value: Any) -> str:
    text = redact_urls(repr(value))
    return text if len(text) <= 80 else text[:77] + "..."


class Reader:
    def __init__(self, path: str, lines: dict[str, int]) -> None:
        self.path = path
        self.lines = lines

    def fail(self, keypath: str, message: str) -> NoReturn:
        line = self.lines.get(keypath)
        parent = keypath
        while line is None and parent:
            parent = parent.rpartition(".")[0] if "." in parent else ""
            line = self.lines.get(parent)
        raise MatrixError(self.path, message, keypath or "<top>", line)

    def mapping(
        self,
        value: Any,
        keypath: str,
        required: tuple[str, ...] = (),
        optional: tuple[str, ...] = (),
        *,
        open_keys: bool = False,
    ) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(keypath, f"expected a mapping, got {_kind(value)} {_show(value)}")
        if not open_keys:
            allowed = (*required, *optional)
            for key in value:
                if key not in allowed:
                    self.fail(
                        keypath_join(keypath, key),
                        f"unknown key {key!r} (valid keys here: {', '.join(allowed)})",
                    )
        for key in required:
            if key not in value:
                self.fail(keypath, f"missing required key {key!r}")
        return value

    def seq(self, value: Any, keypath: str, *, non_empty: bool = True) -> list[Any]:
        if not isinstance(value, list):
            self.fail(keypath, f"expected a list, got {_kind(value)} {_show(value)}")
        if non_empty and not value:
            self.fail(keypath, "expected a non-empty list")
        return value

    def text(self, value: Any, keypath: str, pattern: Pattern) -> str:
        if not isinstance(value, str):
            self.fail(
                keypath, f"expected a {pattern.name} (e.g. {pattern.example!r}), got {_kind(value)}"
            )
        if not pattern.matches(value):
            self.fail(
                keypath,
                f"invalid {pattern.name} {_show(value)}: must match {pattern.regex.pattern} "
                f"(e.g. {pattern.example!r})",
            )
        return value

    def choice(self, value: Any, keypath: str, choices: tuple[str, ...]) -> str:
        if not isinstance(value, str) or value not in choices:
            self.fail(
                keypath, f"invalid value {_show(value)}: expected one of {', '.join(choices)}"
            )
        return value

    def integer(self, value: Any, keypath: str, lo: int, hi: int) -> int:
        if not isinstance(value, str) or not value.isdigit():
            self.fail(keypath, f"expected an integer, got {_kind(value)} {_show(value)}")
        number = int(value)
        if not lo <= number <= hi:
            self.fail(keypath, f"{number} is out of range ({lo}..{hi})")
        return number

    def boolean(self, value: Any, keypath: str) -> bool:
        if not isinstance(value, bool):
            self.fail(keypath, f"expected true or false, got {_kind(value)} {_show(value)}")
        return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return "the scalar"
