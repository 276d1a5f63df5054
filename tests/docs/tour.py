"""The command examples of a Markdown page, as steps a test runs through a real shell.

A *shell block* is a fenced block whose info string is `sh`, `shell`, `bash` or `console`:
- `sh`/`shell`/`bash`: every line is a command (a trailing `\\` continues it; blank and
  comment-only lines are skipped);
- `console`: lines starting with `$ ` are commands; the lines after one, up to the next `$ `, are
  the output the page shows, checked against the real output (in order; a line `...` skips any
  number of lines, and `…` inside a line matches any text).

An HTML comment on the last non-blank line before the fence marks the whole block:

    <!-- tour: needs-gpu: no NVIDIA GPU is visible -->
    <!-- tour: needs-registry: <text the failure prints here> -->
    <!-- tour: needs-remote-host: <text> -->
    <!-- tour: skip: <why it cannot run in any test> -->
    <!-- tour: exit 1 -->                 (a documented exit status other than 0)

A `needs-*` block must fail here (exit status not 0), print the text after the second colon
(when given) and no Python traceback; `skip` needs a reason; `exit N` commands must exit with N.
Blocks without a mark must exit 0. Other fenced blocks (no info string, `yaml`, `json`, ...) are
not commands. The test may stand documented values in for the placeholders IMAGE and CELL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SHELL_LANGS = frozenset({"sh", "shell", "bash", "console"})
KINDS = ("needs-gpu", "needs-registry", "needs-remote-host", "skip", "exit")
_MARK = re.compile(r"<!--\s*tour:\s*([a-z-]+)(?:\s+(\d+))?\s*(?::\s*(.*?))?\s*-->")
_FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w-]*)")


class TourError(ValueError):
    """A page whose tour cannot be read: names the file and line."""


@dataclass(frozen=True)
class Mark:
    kind: str = "run"  # run | exit | needs-gpu | needs-registry | needs-remote-host | skip
    text: str = ""  # needs-*: what the failure prints; skip: why
    status: int = 0  # run: 0; exit: its N


@dataclass(frozen=True)
class Step:
    where: str  # file:line of the command
    command: str
    expected: tuple[str, ...]  # the output the page shows (console blocks)
    mark: Mark


def _mark(line: str, where: str) -> Mark | None:
    found = _MARK.search(line)
    if found is None:
        return None
    kind, status, text = found.group(1), found.group(2), (found.group(3) or "").strip()
    if kind not in KINDS:
        raise TourError(f"{where}: unknown tour mark {kind!r}: expected one of {', '.join(KINDS)}")
    if kind == "skip" and not text:
        raise TourError(f"{where}: `tour: skip` needs a reason: <!-- tour: skip: why -->")
    if (kind == "exit") != (status is not None):
        raise TourError(f"{where}: a status goes with `exit` only: <!-- tour: exit 1 -->")
    return Mark(kind, text, int(status or 0))


def _commands(body: list[tuple[int, str]], console: bool) -> list[tuple[int, str, list[str]]]:
    """(line number, command, shown output) of a block's lines."""
    out: list[tuple[int, str, list[str]]] = []
    pending: tuple[int, str] | None = None
    for number, raw in body:
        line = raw.rstrip()
        if pending is not None:
            start, text = pending
            text = f"{text}\n{line}"
            pending = (start, text) if line.endswith("\\") else None
            if pending is None:
                out.append((start, text, []))
            continue
        if console and not line.startswith("$ "):
            if out:
                out[-1][2].append(line)
            continue
        command = line[2:] if console else line
        if not command.strip() or command.lstrip().startswith("#"):
            continue
        if command.endswith("\\"):
            pending = (number, command)
        else:
            out.append((number, command, []))
    if pending is not None:
        out.append((pending[0], pending[1], []))
    return out


def steps(path: Path, name: str | None = None) -> list[list[Step]]:
    """The shell blocks of a page, each as its steps, in page order."""
    name = name or path.name
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[list[Step]] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        ticks, lang, start = fence.group(2), fence.group(3), i
        body: list[tuple[int, str]] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(ticks):
            body.append((i + 1, lines[i]))
            i += 1
        i += 1
        if lang not in SHELL_LANGS:
            continue
        before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        mark = _mark(before, f"{name}:{start}") or Mark()
        blocks.append(
            [
                Step(f"{name}:{n}", command, tuple(shown), mark)
                for n, command, shown in _commands(body, lang == "console")
            ]
        )
    return blocks


def shown_in(expected: tuple[str, ...], output: str) -> str | None:
    """None when every shown line appears in output, in order; else the first that does not."""
    lines = [line.rstrip() for line in output.splitlines()]
    at = 0
    for shown in expected:
        want = shown.rstrip()
        if want in ("", "..."):
            continue
        pattern = re.compile(".*".join(re.escape(p) for p in want.split("…")) + r"\Z")
        while at < len(lines) and not pattern.match(lines[at]):
            at += 1
        if at == len(lines):
            return shown
        at += 1
    return None
