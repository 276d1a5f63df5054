"""Write base digests into matrix.yaml as a careful textual edit (pure: text in, text out).

Only the value of `oses.<key>.digest` changes (or a `digest:` line is added right after the
OS's `base:` line, at its indentation); comments, order, quoting and every other byte stay as
they were. The result is parsed again and must say exactly what was asked, or nothing is
returned.
"""

from __future__ import annotations

import re

from builder.errors import TrainimgError
from builder.matrix.yamlnodes import safe_load

_TOP = re.compile(r"^[^\s#]")
_KEY = re.compile(r"^(?P<indent>\s+)(?P<key>[A-Za-z0-9._-]+):\s*(?:#.*)?$")
_FIELD = re.compile(
    r"^(?P<indent>\s+)(?P<key>[A-Za-z0-9_-]+):(?P<gap>\s*)(?P<value>[^#\n]*?)(?P<tail>\s*#.*)?$"
)


class PinError(TrainimgError):
    pass


def _os_block(lines: list[str], os_key: str) -> tuple[int, int, int]:
    """(first line after `  <os_key>:`, end of its block, indentation of its fields)."""
    start = next((i for i, line in enumerate(lines) if re.match(r"^oses:\s*(#.*)?$", line)), None)
    if start is None:
        raise PinError("matrix.yaml has no top-level `oses:` block")
    end = next((i for i in range(start + 1, len(lines)) if _TOP.match(lines[i])), len(lines))
    for i in range(start + 1, end):
        m = _KEY.match(lines[i])
        if m and m.group("key") == os_key:
            indent = len(m.group("indent"))
            j = i + 1
            while j < end and (
                not lines[j].strip()
                or lines[j].lstrip().startswith("#")
                or len(lines[j]) - len(lines[j].lstrip()) > indent
            ):
                j += 1
            fields = [
                len(lines[k]) - len(lines[k].lstrip())
                for k in range(i + 1, j)
                if lines[k].strip() and not lines[k].lstrip().startswith("#")
            ]
            if not fields:
                break
            return i + 1, j, min(fields)
    raise PinError(f"matrix.yaml: oses.{os_key} not found as a block mapping")


def set_digest(text: str, os_key: str, digest: str | None) -> str:
    """`text` with oses.<os_key>.digest set to `digest` (None writes `null`)."""
    lines = text.splitlines(keepends=True)
    first, end, indent = _os_block(lines, os_key)
    value = digest or "null"
    done = False
    for i in range(first, end):
        m = _FIELD.match(lines[i].rstrip("\n"))
        if m and len(m.group("indent")) == indent and m.group("key") == "digest":
            gap = m.group("gap") or " "
            lines[i] = f"{m.group('indent')}digest:{gap}{value}{m.group('tail') or ''}\n"
            done = True
            break
    if not done:
        for i in range(first, end):
            m = _FIELD.match(lines[i].rstrip("\n"))
            if m and len(m.group("indent")) == indent and m.group("key") == "base":
                lines.insert(i + 1, f"{' ' * indent}digest: {value}\n")
                done = True
                break
    if not done:
        raise PinError(f"matrix.yaml: oses.{os_key} has no `base:` line to pin")
    out = "".join(lines)
    parsed = safe_load(out)
    if (parsed.get("oses") or {}).get(os_key, {}).get("digest") != digest:
        raise PinError(f"matrix.yaml: could not set oses.{os_key}.digest safely; edit it by hand")
    return out
