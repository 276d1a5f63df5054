"""A cell's dependency closure, resolved offline from the wheels' own metadata.

The wheelhouse is filled by pip (which resolves against an index); the build plan must then know,
without any network, that every wheel pip inside the image will need is there. Starting from the
cell's exact pins, each chosen wheel's `Requires-Dist` lines are evaluated for the cell's
interpreter and platform (PEP 508 markers) and satisfied from the wheelhouse: the newest
compatible wheel that meets the specifier, as pip would choose. What cannot be satisfied is
reported with what asked for it; a pin another wheel contradicts is a conflict.
"""

from __future__ import annotations

import re
import zipfile
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from email.parser import HeaderParser
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from builder.errors import TrainimgError

_METADATA = re.compile(r"^[^/]+\.dist-info/METADATA$")


class MetadataError(TrainimgError):
    pass


@dataclass(frozen=True)
class Wheel:
    """A wheel file, by what its name says."""

    path: Path
    name: NormalizedName
    version: Version
    tags: frozenset[Tag]


@dataclass(frozen=True)
class Missing:
    name: NormalizedName
    requirement: str
    needed_by: str

    def __str__(self) -> str:
        return f"{self.requirement} (needed by {self.needed_by})"


@dataclass(frozen=True)
class Resolution:
    chosen: tuple[Wheel, ...]  # in resolution order, roots first
    missing: tuple[Missing, ...] = ()
    conflicts: tuple[str, ...] = ()
    needed_by: dict[NormalizedName, str] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return not self.missing and not self.conflicts


def marker_environment(python: str, machine: str = "x86_64") -> dict[str, str]:
    """PEP 508 marker values of CPython `python` ("3.11") on Linux/`machine`."""
    return {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "implementation_name": "cpython",
        "implementation_version": f"{python}.0",
        "platform_python_implementation": "CPython",
        "platform_system": "Linux",
        "sys_platform": "linux",
        "platform_machine": machine,
        "os_name": "posix",
        "platform_release": "",
        "platform_version": "",
        "extra": "",
    }


def requires_dist(path: Path) -> list[str]:
    """The `Requires-Dist` lines of a wheel's METADATA."""
    try:
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if _METADATA.match(n)]
            if len(names) != 1:
                found = len(names)
                raise MetadataError(f"{path}: expected one *.dist-info/METADATA, found {found}")
            text = zf.read(names[0]).decode("utf-8")
    except (OSError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        raise MetadataError(f"{path} is not a readable wheel: {exc}") from None
    return HeaderParser().parsestr(text).get_all("Requires-Dist") or []


def _applies(req: Requirement, env: dict[str, str], extras: Iterable[str]) -> bool:
    marker: Marker | None = req.marker
    if marker is None:
        return True
    return any(marker.evaluate({**env, "extra": e}) for e in ("", *extras))


def resolve(
    roots: Sequence[str],
    wheels: Sequence[Wheel],
    tags: frozenset[Tag],
    env: dict[str, str],
    metadata: Callable[[Path], list[str]] = requires_dist,
) -> Resolution:
    """The closure of `roots` (exact pins) within `wheels`."""
    usable: dict[NormalizedName, list[Wheel]] = {}
    for w in wheels:
        if w.tags & tags:
            usable.setdefault(w.name, []).append(w)
    chosen: dict[NormalizedName, Wheel] = {}
    needed_by: dict[NormalizedName, str] = {}
    missing: list[Missing] = []
    conflicts: list[str] = []
    queue: deque[tuple[Requirement, str]] = deque(
        (Requirement(r), "the cell's pins") for r in roots
    )
    while queue:
        req, by = queue.popleft()
        name = canonicalize_name(req.name)
        have = chosen.get(name)
        if have is not None:
            if not req.specifier.contains(have.version, prereleases=True):
                conflicts.append(f"{name} {have.version} is chosen but {by} needs {req}")
            continue
        fits = [w for w in usable.get(name, []) if req.specifier.contains(w.version, True)]
        if not fits:
            if all(m.name != name for m in missing):
                missing.append(Missing(name, f"{name}{req.specifier}", by))
            continue
        best = max(fits, key=lambda w: w.version)
        chosen[name] = best
        needed_by[name] = by
        for line in metadata(best.path):
            try:
                dep = Requirement(line)
            except InvalidRequirement as exc:
                where = best.path.name
                raise MetadataError(f"{where}: bad Requires-Dist {line!r}: {exc}") from None
            if _applies(dep, env, req.extras):
                queue.append((dep, f"{name} {best.version}"))
    return Resolution(tuple(chosen.values()), tuple(missing), tuple(conflicts), needed_by)
