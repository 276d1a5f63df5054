"""The user's requirements for an extended image, judged against the parent's lock (pure).

A line may name a package and a version specifier (PEP 508; markers and extras allowed);
pip options, URLs and editable installs are refused, because the child installs air-gapped
from a hash-locked wheelhouse. A requirement on a package the parent locked is refused when
its specifier excludes the locked version: installing it would replace that package (torch
with another CUDA build, NCCL or cuDNN with another version) under everything verify proved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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

    @property
    def name(self) -> NormalizedName:
        return canonicalize_name(self.requirement.name)


def parse(path: Path) -> tuple[UserRequirement, ...]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RequirementsError(f"{path}: cannot read the requirements file ({exc})") from None
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-") or "://" in line or " @ " in line:
            raise RequirementsError(
                f"{path}:{n}: {line!r}: only `name[extras] specifier` lines are taken (the child "
                "installs air-gapped from its own hash-locked wheelhouse: no pip options, URLs "
                "or editable installs)"
            )
        try:
            req = Requirement(line)
        except InvalidRequirement as exc:
            raise RequirementsError(
                f"{path}:{n}: {line!r} is not a requirement ({exc}); e.g. `einops==0.8.1`"
            ) from None
        out.append(UserRequirement(n, line, req))
    if not out:
        raise RequirementsError(f"{path}: no requirement in it: nothing to add to the image")
    return tuple(out)


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
