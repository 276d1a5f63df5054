"""The wheelhouse: the wheels an air-gapped build installs, chosen per cell and hash-checked.

A wheelhouse is a directory of wheels plus `wheelhouse.lock`, a sha256sum-format list
(`<sha256>  <file>`; `sha256sum -c wheelhouse.lock` checks it by hand). For each cell the builder
picks exactly the files its pins need (torch, torchao, python_packages) for its Python and
glibc, checks each against the lock, and only those go into the build context. A wheelhouse
without a lock is used unchecked, and said so. `fill` makes one from local directories
(/opt/wheels) and `pip download`, and writes the lock.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import (
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from builder.errors import TrainimgError
from builder.matrix.model import Cell, Project
from builder.render import atomic_write
from builder.render import context as render_context
from builder.rules import torch_builds

LOCK_NAME = "wheelhouse.lock"
PYPI = "https://pypi.org/simple"
ARCH = "x86_64"
_REQ = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)$")
_LOCK_LINE = re.compile(r"^([0-9a-f]{64}) [ *]([^/\x00\n]+)$")


class WheelhouseError(TrainimgError):
    pass


@dataclass(frozen=True)
class Requirement:
    name: NormalizedName
    version: Version

    def __str__(self) -> str:
        return f"{self.name}=={self.version}"


@dataclass(frozen=True)
class Wheel:
    path: Path
    name: NormalizedName
    version: Version
    tags: frozenset[Tag]


def requirements(cell: Cell, project: Project) -> tuple[Requirement, ...]:
    """Exactly what the cell's Containerfile pip-installs (one source: render.context)."""
    out = []
    for spec in render_context(cell, project)["pip_requirements"]:
        m = _REQ.match(str(spec))
        if not m:
            raise WheelhouseError(f"cell {cell.name}: requirement {spec!r} is not an exact pin")
        out.append(Requirement(canonicalize_name(m.group(1)), Version(m.group(2))))
    return tuple(out)


def platforms(cell: Cell) -> list[str]:
    """The platform tags pip accepts inside the cell's OS (glibc from builder/rules/oses.py)."""
    glibc = cell.os.distro.glibc
    major, minor = glibc.release[0], glibc.release[1] if len(glibc.release) > 1 else 0
    out = [f"manylinux_{major}_{m}_{ARCH}" for m in range(minor, 4, -1)]
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    out += [f"{name}_{ARCH}" for m, name in legacy.items() if major == 2 and minor >= m]
    return [*out, f"linux_{ARCH}"]


def supported_tags(cell: Cell) -> frozenset[Tag]:
    py = tuple(int(x) for x in cell.python.split("."))
    plats = platforms(cell)
    tags = list(cpython_tags(python_version=py, platforms=plats))
    tags += compatible_tags(python_version=py, interpreter=f"cp{py[0]}{py[1]}", platforms=plats)
    return frozenset(tags)


def scan(directory: Path) -> list[Wheel]:
    out = []
    for path in sorted(directory.glob("*.whl")):
        try:
            name, version, _build, tags = parse_wheel_filename(path.name)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        out.append(Wheel(path, name, version, frozenset(tags)))
    return out


def _matches(wheel: Wheel, req: Requirement, tags: frozenset[Tag]) -> bool:
    return wheel.name == req.name and wheel.version == req.version and bool(wheel.tags & tags)


def missing(
    wheels: Iterable[Wheel], reqs: Sequence[Requirement], tags: frozenset[Tag]
) -> list[Requirement]:
    have = list(wheels)
    return [r for r in reqs if not any(_matches(w, r, tags) for w in have)]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def read_lock(directory: Path) -> dict[str, str] | None:
    """file name -> sha256 from wheelhouse.lock; None when the wheelhouse has no lock."""
    path = directory / LOCK_NAME
    if not path.exists():
        return None
    out = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        m = _LOCK_LINE.match(line)
        if not m:
            raise WheelhouseError(f"{path}:{n}: not `<sha256>  <file>`: {line[:80]!r}")
        out[m.group(2)] = m.group(1)
    return out


def write_lock(directory: Path, hashes: dict[str, str]) -> Path:
    lines = [
        "# trainimg wheelhouse: sha256 of every wheel (check by hand: sha256sum -c wheelhouse.lock)"
    ]
    lines += [f"{sha}  {name}" for name, sha in sorted(hashes.items())]
    path = directory / LOCK_NAME
    atomic_write(path, "\n".join(lines) + "\n")
    return path


@dataclass(frozen=True)
class Selection:
    """The wheelhouse files one cell needs, with their sha256 (checked against the lock)."""

    directory: Path
    files: tuple[tuple[Path, str], ...]  # (path, sha256)
    checked: bool  # False when the wheelhouse has no lock: the hashes were not compared


def select(directory: Path, cell: Cell, project: Project) -> Selection:
    """The files `cell` needs from `directory`; WheelhouseError naming every missing pin or
    every file whose hash disagrees with wheelhouse.lock."""
    if not directory.is_dir():
        raise WheelhouseError(
            f"wheelhouse {directory} is not a directory: fill it with `trainimg wheelhouse`"
        )
    reqs = requirements(cell, project)
    tags = supported_tags(cell)
    wheels = scan(directory)
    lost = missing(wheels, reqs, tags)
    if lost:
        raise WheelhouseError(
            f"wheelhouse {directory} lacks {len(lost)} wheel(s) that cell {cell.name} needs "
            f"(cp{cell.python.replace('.', '')}, glibc {cell.os.distro.glibc}, {ARCH}): "
            f"{', '.join(map(str, lost))}; fill it with "
            f"`trainimg wheelhouse {cell.name} --dest {directory}`"
        )
    chosen = [w for w in wheels if any(_matches(w, r, tags) for r in reqs)]
    lock = read_lock(directory)
    files = []
    bad = []
    for w in chosen:
        sha = sha256_file(w.path)
        if lock is not None:
            if w.path.name not in lock:
                bad.append(f"{w.path.name} is not listed in {LOCK_NAME}")
            elif lock[w.path.name] != sha:
                want = lock[w.path.name]
                bad.append(f"{w.path.name}: sha256 {sha[:16]}… but {LOCK_NAME} says {want[:16]}…")
        files.append((w.path, sha))
    if bad:
        raise WheelhouseError(f"wheelhouse {directory} fails its hash check: " + "; ".join(bad))
    return Selection(directory, tuple(files), lock is not None)


# --- filling a wheelhouse --------------------------------------------------------------------

Runner = Callable[[list[str]], "subprocess.CompletedProcess[str]"]


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=3600)


@dataclass(frozen=True)
class FillReport:
    copied: tuple[str, ...]
    downloaded: tuple[str, ...]
    present: tuple[str, ...]
    lock: Path


def pip_download_argv(
    cell: Cell, reqs: Sequence[Requirement], dest: Path, find_links: Sequence[Path], index_url: str
) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--disable-pip-version-check",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        cell.python,
        "--implementation",
        "cp",
        "--dest",
        str(dest),
        "--index-url",
        index_url,
    ]
    if any(r.name == "torch" for r in reqs):
        index = torch_builds.CU128_INDEX if cell.cuda else torch_builds.CPU_INDEX
        argv += ["--extra-index-url", index]
    for plat in platforms(cell):
        argv += ["--platform", plat]
    argv += ["--platform", "any"]
    for link in find_links:
        argv += ["--find-links", str(link)]
    return argv + [str(r) for r in reqs]


def fill(
    dest: Path,
    cells: Sequence[Cell],
    project: Project,
    *,
    find_links: Sequence[Path] = (),
    index_url: str = PYPI,
    offline: bool = False,
    run: Runner = _run,
    log: Callable[[str], None] = lambda _m: None,
) -> FillReport:
    """Make `dest` hold every wheel `cells` need: copy from `find_links` directories first,
    `pip download` the rest (unless offline), then (re)write wheelhouse.lock. Existing files
    that disagree with an existing lock are an error, never silently replaced."""
    dest.mkdir(parents=True, exist_ok=True)
    old_lock = read_lock(dest) or {}
    copied: list[str] = []
    downloaded: list[str] = []
    present: list[str] = []
    for cell in cells:
        reqs = requirements(cell, project)
        tags = supported_tags(cell)
        have = scan(dest)
        present += [str(r) for r in reqs if r not in missing(have, [r], tags)]
        todo = missing(have, reqs, tags)
        for link in find_links:
            if not todo or not link.is_dir():
                continue
            for w in scan(link):
                if any(_matches(w, r, tags) for r in todo) and not (dest / w.path.name).exists():
                    log(f"copy {w.path.name} from {link}")
                    _copy(w.path, dest / w.path.name)
                    copied.append(w.path.name)
            todo = missing(scan(dest), reqs, tags)
        if todo and offline:
            raise WheelhouseError(
                f"cell {cell.name}: no wheel for {', '.join(map(str, todo))} in {dest} or "
                f"{', '.join(map(str, find_links)) or 'any --find-links directory'} (offline)"
            )
        if todo:
            before = {p.name for p in dest.glob("*.whl")}
            log(f"pip download {' '.join(map(str, todo))}")
            proc = run(pip_download_argv(cell, todo, dest, find_links, index_url))
            if proc.returncode != 0:
                tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-12:])
                raise WheelhouseError(f"pip download for cell {cell.name} failed:\n{tail}")
            downloaded += sorted({p.name for p in dest.glob("*.whl")} - before)
            still = missing(scan(dest), reqs, tags)
            if still:
                raise WheelhouseError(
                    f"cell {cell.name}: pip download finished but no compatible wheel arrived "
                    f"for {', '.join(map(str, still))}"
                )
    hashes = {}
    for path in sorted(dest.glob("*.whl")):
        sha = sha256_file(path)
        if path.name in old_lock and old_lock[path.name] != sha:
            raise WheelhouseError(
                f"{dest / path.name}: sha256 {sha[:16]}… but {LOCK_NAME} says "
                f"{old_lock[path.name][:16]}…; remove the file (or the lock entry) and fill again"
            )
        hashes[path.name] = sha
    lock = write_lock(dest, hashes)
    return FillReport(tuple(copied), tuple(downloaded), tuple(dict.fromkeys(present)), lock)


def _copy(src: Path, dst: Path) -> None:
    """Copy through a temporary name, so an interrupted copy never looks like a wheel."""
    fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", dir=dst.parent)
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
