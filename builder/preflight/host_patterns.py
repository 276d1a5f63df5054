"""Ansible's host grammar (pure): ranges in inventory host names, `host:port` on an INI host
line, and `--limit` patterns, matched the way ansible-core does (InventoryManager; held to it
by tests/preflight/test_inventory_ansible.py).

Ranges: `node[01:16]` (zero-padded), `node[0:30:10]` (a step), `rack-[a:f]` (letters); one name
may hold several, each multiplying the count. How many names one pattern expands to is counted
before anything is built, and a pattern past MAX_HOSTS_PER_PATTERN is refused
(`node[0:99999999]` is an error naming it, never a MemoryError).

Patterns: `a,b` or `a:b` (union), `a:&b` (in both), `a:!b` (not b), `*`/`?` globs and `~regex`
over group and host names; a group matches all its hosts, its children's included. As in
ansible-core, `&` and `!` apply after every plain pattern, in the order given.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
import string
from collections.abc import Callable, Sequence

# The most host names one inventory pattern may expand to: a fleet of this size in one pattern
# is already rare; a typo such as node[0:99999999] must fail fast and say so.
MAX_HOSTS_PER_PATTERN = 10_000

_RANGE = re.compile(r"\[([^\[\]]*)\]")
_PORT_TAIL = re.compile(r":([0-9]+)$")


class PatternError(ValueError):
    """A host range or a --limit pattern that cannot be used; the message says why."""


def _bounds(pattern: str, body: str) -> tuple[list[str] | range, Callable[[object], str]]:
    parts = body.split(":")
    if len(parts) not in (2, 3):
        raise PatternError(f"{pattern!r}: a host range is [begin:end] or [begin:end:step]")
    beg, end = parts[0] or "0", parts[1]
    step_text = parts[2] if len(parts) == 3 else "1"
    if not end:
        raise PatternError(f"{pattern!r}: a host range needs an end ([{beg}:END])")
    if not step_text.isdigit() or int(step_text) < 1:
        raise PatternError(f"{pattern!r}: the step of a host range is a positive number")
    step = int(step_text)
    letters = string.ascii_letters
    if beg in letters and end in letters and len(beg) == len(end) == 1:
        lo, hi = letters.index(beg), letters.index(end)
        if lo > hi:
            raise PatternError(f"{pattern!r}: a host range's begin comes after its end")
        return list(letters[lo : hi + 1 : step]), str
    if not (beg.isascii() and beg.isdigit() and end.isascii() and end.isdigit()):
        raise PatternError(f"{pattern!r}: [{body}] is not a range of numbers or of letters")
    width = len(beg) if beg.startswith("0") and len(beg) > 1 else 0
    if width and width != len(end):
        raise PatternError(f"{pattern!r}: a zero-padded range needs begin and end of one width")
    return range(int(beg), int(end) + 1, step), (lambda x: str(x).zfill(width))


def count(pattern: str) -> int:
    """How many names `pattern` expands to (computed, nothing built)."""
    total = 1
    for m in _RANGE.finditer(pattern):
        if ":" not in m[1]:
            continue
        seq, _ = _bounds(pattern, m[1])
        total *= len(seq)
    return total


def expand_hosts(pattern: str, limit: int = MAX_HOSTS_PER_PATTERN) -> list[str]:
    """Every host name of an inventory pattern (`web[01:03]` -> web01 web02 web03)."""
    n = count(pattern)
    if n > limit:
        raise PatternError(
            f"{pattern!r} expands to {n:,} hosts; one pattern may expand to at most {limit:,} "
            "(split the range, or check it for a typo)"
        )
    return _expand(pattern)


def _expand(pattern: str) -> list[str]:
    m = next((m for m in _RANGE.finditer(pattern) if ":" in m[1]), None)
    if m is None:
        return [pattern]
    seq, fill = _bounds(pattern, m[1])
    head, tail = pattern[: m.start()], pattern[m.end() :]
    return [name for item in seq for name in _expand(head + fill(item) + tail)]


def split_port(hostpattern: str) -> tuple[str, int | None]:
    """An INI host line's first word: `name`, `name:PORT`, `[v6]:PORT`, a bare IPv6 address,
    or a range (`node[1:4]:2222`); the port, when given, becomes the host's ansible_port."""
    text = hostpattern.strip()
    try:
        ipaddress.ip_address(text)
        return text, None
    except ValueError:
        pass
    if text.startswith("["):
        m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\](?::([0-9]+))?", text)
        if m:
            return m[1], int(m[2]) if m[2] else None
    m = _PORT_TAIL.search(text)
    if m and text[: m.start()].count("[") == text[: m.start()].count("]"):
        return text[: m.start()], int(m[1])
    return text, None


def split_limit(text: str) -> list[str]:
    """A --limit into its patterns: split on commas when there are any, else on colons outside
    brackets (ansible-core's split_host_pattern)."""
    text = text.strip()
    if "," in text:
        parts = text.split(",")
    else:
        try:
            ipaddress.ip_address(text)
            parts = [text]
        except ValueError:
            parts = re.findall(r"(?:[^\s:\[\]]|\[[^\]]*\])+", text)
    return [p.strip() for p in parts if p.strip()]


def _ordered(patterns: Sequence[str]) -> list[str]:
    plain = [p for p in patterns if p[0] not in "&!"]
    rest = [p for p in patterns if p[0] == "&"] + [p for p in patterns if p[0] == "!"]
    return (plain or ["all"]) + rest


def _matcher(pattern: str) -> Callable[[str], bool]:
    if pattern.startswith("~"):
        try:
            rx = re.compile(pattern[1:])
        except re.error as exc:
            raise PatternError(f"{pattern!r}: not a regular expression ({exc})") from None
        return lambda name: rx.match(name) is not None
    rx = re.compile(fnmatch.translate(pattern))
    return lambda name: rx.match(name) is not None


_SUBSCRIPT = re.compile(r".+\[(?:-?[0-9]+|[0-9]+[:-][0-9]*)\]")


def _one(pattern: str, groups: dict[str, list[str]], hosts: Sequence[str]) -> list[str]:
    """The hosts one pattern (without its & or !) names: its groups' hosts, then (when no group
    matched, or the pattern is a glob or regex) the hosts whose names match."""
    if _SUBSCRIPT.fullmatch(pattern):
        raise PatternError(
            f"{pattern!r}: subscripts (group[0], group[1:3]) are not supported: name the hosts"
        )
    match = _matcher(pattern)
    found = [g for g in groups if match(g)]
    out = [h for g in found for h in groups[g]]
    if not found or pattern[0] == "~" or any(c in pattern for c in ".?*["):
        out += [h for h in hosts if match(h)]
    return list(dict.fromkeys(out))


def limit_hosts(limit: str, groups: dict[str, list[str]], hosts: Sequence[str]) -> list[str]:
    """The hosts a --limit names, in inventory order. `groups` maps every group (with `all`)
    to its hosts, children's included; a pattern that matches nothing is an error here
    (ansible-core warns and goes on: for a preflight gate a typo must not shrink the fleet)."""
    patterns = split_limit(limit)
    if not patterns:
        raise PatternError(f"--limit {limit!r} holds no pattern")
    chosen: list[str] = []
    for p in _ordered(patterns):
        name = p[1:] if p[0] in "&!" else p
        if not name:
            raise PatternError(f"--limit {limit!r}: {p!r} names nothing")
        that = [name] if name in hosts else _one(name, groups, hosts)
        if not that:
            raise PatternError(f"--limit {limit!r}: {name!r} matches no group or host")
        if p[0] == "!":
            chosen = [h for h in chosen if h not in set(that)]
        elif p[0] == "&":
            chosen = [h for h in chosen if h in set(that)]
        else:
            chosen += [h for h in that if h not in set(chosen)]
    order = {h: i for i, h in enumerate(hosts)}
    return sorted(chosen, key=lambda h: order.get(h, len(order)))
