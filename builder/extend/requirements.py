"""The user's requirements for an extended image, judged against the parent's lock (pure).

A line may name a package and a version specifier (PEP 508; markers and extras allowed), and
`--hash=sha256:<hex>` options (pip's hash-checking form, as `pip-compile --generate-hashes`
writes it, continued over lines ending in `\\`); other pip options, URLs and editable installs
are refused, because the child installs air-gapped from a hash-locked wheelhouse. A line whose
environment marker is false for the cell (its Python, Linux x86_64) is dropped (`applicable`).
A requirement on a package the parent locked is refused when its specifier excludes the locked
version: installing it would replace that package (torch with another CUDA build, NCCL or cuDNN
with another version) under everything verify proved.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from builder.errors import TrainimgError


class RequirementsError(TrainimgError):
    """Bad input: exit 2, naming the file, the line and what would be valid."""


@dataclass(frozen=True)
class UserRequirement:
    line: int
    text: str
    requirement: Requirement
    hashes: frozenset[str] = field(default=frozenset())  # sha256 hex digests the user allows

    @property
    def name(self) -> NormalizedName:
        return canonicalize_name(self.requirement.name)


_HASH = re.compile(r"(?:^|\s)--hash(?:=|\s+)(\S+)")
_SHA256 = re.compile(r"^sha256:([0-9a-f]{64})$")


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each requirement, comments cut, `\\` continuations joined."""
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].rstrip()
        if line.lstrip().startswith("#"):
            line = ""
        cont = line.endswith("\\")
        line = line.removesuffix("\\").strip()
        first, sofar = pending if pending else (n, "")
        joined = f"{sofar} {line}".strip()
        pending = (first, joined) if cont else None
        if not cont and joined:
            out.append((first, joined))
    if pending and pending[1]:
        out.append(pending)
    return out


def _hashes(path: Path, n: int, line: str) -> tuple[str, frozenset[str]]:
    """The line without its --hash options, and the sha256 digests they name."""
    found = set()
    for value in _HASH.findall(line):
        m = _SHA256.match(value)
        if not m:
            raise RequirementsError(
                f"{path}:{n}: --hash {value!r}: only sha256:<64 lower-case hex> is taken (the "
                "child's wheelhouse.lock is sha256)"
            )
        found.add(m.group(1))
    return _HASH.sub("", line).strip(), frozenset(found)


def parse(path: Path) -> tuple[UserRequirement, ...]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RequirementsError(f"{path}: cannot read the requirements file ({exc})") from None
    out = []
    for n, full in _logical_lines(text):
        line, hashes = _hashes(path, n, full)
        if line.startswith("-") or " -" in line or "://" in line or " @ " in line:
            raise RequirementsError(
                f"{path}:{n}: {full!r}: only `name[extras] specifier [; marker] "
                "[--hash=sha256:HEX ...]` lines are taken (the child installs air-gapped from its "
                "own hash-locked wheelhouse: no other pip options, URLs or editable installs)"
            )
        try:
            req = Requirement(line)
        except InvalidRequirement as exc:
            raise RequirementsError(
                f"{path}:{n}: {line!r} is not a requirement ({exc}); e.g. `einops==0.8.1`"
            ) from None
        out.append(UserRequirement(n, line, req, hashes))
    if not out:
        raise RequirementsError(f"{path}: no requirement in it: nothing to add to the image")
    return tuple(out)


def applicable(
    reqs: Sequence[UserRequirement], environment: Mapping[str, str]
) -> tuple[tuple[UserRequirement, ...], tuple[UserRequirement, ...]]:
    """(the requirements whose marker holds in `environment`, those whose marker is false)."""
    keep = [r for r in reqs if r.requirement.marker is None or r.requirement.marker.evaluate(
        dict(environment))]  # fmt: skip
    return tuple(keep), tuple(r for r in reqs if r not in keep)


def unhashed(reqs: Sequence[UserRequirement]) -> bool:
    """True when no line has a --hash: pip's hash-checking mode is off."""
    return not any(r.hashes for r in reqs)


def replacing(
    reqs: Sequence[UserRequirement], locked: Mapping[NormalizedName, Version]
) -> list[str]:
    """Why each requirement that would replace a locked package is refused (empty: none)."""
    out = []
    for r in reqs:
        have = locked.get(r.name)
        if have is None:
            continue
        if r.requirement.specifier and not r.requirement.specifier.contains(have, prereleases=True):
            out.append(
                f"line {r.line}: {r.text!r} would replace {r.name} {have}, which the parent "
                f"image locks (it wants {r.name}{r.requirement.specifier})"
            )
    return out


def constraints_txt(locked: Mapping[NormalizedName, Version]) -> str:
    """pip's constraints file from the parent's lock: every locked package at its version."""
    lines = ["# the parent image's lock: every package it ships stays at its version"]
    lines += [f"{name}=={version}" for name, version in sorted(locked.items())]
    return "\n".join(lines) + "\n"
