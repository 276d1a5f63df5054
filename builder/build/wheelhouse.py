"""The wheelhouse: the wheels an air-gapped build installs, resolved per cell and hash-locked.

A wheelhouse is a directory of wheels plus `wheelhouse.lock`, a sha256sum-format list
(`<sha256>  <file>`; `sha256sum -c wheelhouse.lock` checks it by hand). For each cell the builder
resolves the full dependency closure of its pins (torch, torchao, python_packages) from the
wheels' own metadata for its Python and glibc (builder/build/closure.py), refuses the cell naming
every wheel the closure lacks, checks each chosen file against the lock, and derives per-group
requirements files with `--hash` lines from it (builder/spec/wheel_groups.py). Only those files go
into the build context. `fill` makes a wheelhouse from local directories (/opt/wheels) and
`pip download` (with dependencies, for the cell's platform), and writes the lock.

One module, over 400 lines: choosing a cell's wheels and filling a wheelhouse read and write
the one lock and resolve the one closure, and filling shows its pip run as it goes
(builder/build/streamed.py); split, each half would import the other's privates.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement as PackagingRequirement
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import (
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from builder.atomic_file import atomic_write
from builder.build import closure, torchao_build
from builder.build.closure import Wheel
from builder.build.streamed import run_streamed
from builder.errors import TrainimgError
from builder.facts import torch_builds
from builder.matrix.model import Cell, Project
from builder.progress import SILENT, Progress, size
from builder.spec import wheel_groups
from builder.spec.pip_pins import pip_pins

LOCK_NAME = "wheelhouse.lock"
PYPI = "https://pypi.org/simple"
ARCH = "x86_64"
_LOCK_LINE = re.compile(r"^([0-9a-f]{64}) [ *]([^/\x00\n]+)$")


class WheelhouseError(TrainimgError):
    pass


@dataclass(frozen=True)
class PinnedRequirement:
    name: NormalizedName
    version: Version

    def __str__(self) -> str:
        return f"{self.name}=={self.version}"


def requirements(cell: Cell) -> tuple[PinnedRequirement, ...]:
    """Exactly what the cell's Containerfile pip-installs (one source: spec.pip_pins), parsed."""
    out = []
    for pin in pip_pins(cell):
        try:
            out.append(PinnedRequirement(canonicalize_name(pin.name), Version(pin.version)))
        except InvalidVersion:
            raise WheelhouseError(
                f"cell {cell.name}: pip pin {pin} has no PEP 440 version"
            ) from None
    return tuple(out)


def platforms(cell: Cell) -> list[str]:
    """The platform tags pip accepts inside the cell's OS (glibc from builder/facts/oses.py)."""
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


def cell_closure(directory: Path, cell: Cell) -> closure.Resolution:
    """The cell's closure within the wheels of `directory` (offline, from their metadata)."""
    roots = [str(r) for r in requirements(cell)]
    env = closure.marker_environment(cell.python, ARCH)
    return closure.resolve(roots, scan(directory), supported_tags(cell), env)


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
class Locked:
    """One wheel of a cell's closure, with its sha256 from the lock and its install group."""

    path: Path
    name: NormalizedName
    version: Version
    sha256: str
    group: str

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version} --hash=sha256:{self.sha256}"


@dataclass(frozen=True)
class Selection:
    """The wheelhouse files one cell needs: its whole closure, each checked against the lock."""

    directory: Path
    wheels: tuple[Locked, ...]
    groups: tuple[str, ...]

    @property
    def files(self) -> tuple[tuple[Path, str], ...]:
        return tuple((w.path, w.sha256) for w in self.wheels)

    def in_group(self, group: str) -> tuple[Locked, ...]:
        return tuple(w for w in self.wheels if w.group == group)

    def requirements_txt(self, group: str) -> str:
        """The group's requirements file, derived from the lock: one exact pin with its hash a
        line, so pip refuses any other bytes (--require-hashes)."""
        lines = [f"# {group} wheels, derived from {LOCK_NAME} by trainimg"]
        lines += sorted(w.requirement for w in self.in_group(group))
        return "\n".join(lines) + "\n"


def _where(cell: Cell) -> str:
    return f"cp{cell.python.replace('.', '')}, glibc {cell.os.distro.glibc}, {ARCH}"


def select(directory: Path, cell: Cell, project: Project) -> Selection:
    """The closure `cell` needs from `directory`; WheelhouseError naming every missing wheel,
    every conflict, and every file whose hash disagrees with wheelhouse.lock."""
    if not directory.is_dir():
        raise WheelhouseError(
            f"cell {cell.name}: wheelhouse {directory} is not a directory: fill it with "
            f"`trainimg wheelhouse {cell.name} --dest {directory}`"
        )
    res = cell_closure(directory, cell)
    if res.missing:
        raise WheelhouseError(
            f"cell {cell.name}: wheelhouse {directory} lacks {len(res.missing)} wheel(s) of the "
            f"cell's dependency closure ({_where(cell)}): {'; '.join(map(str, res.missing))}; "
            f"fill it with `trainimg wheelhouse {cell.name} --dest {directory}`"
        )
    if res.conflicts:
        raise WheelhouseError(
            f"cell {cell.name}: the pins in matrix.yaml contradict the wheels' own requirements "
            f"in {directory}: {'; '.join(res.conflicts)}"
        )
    torchao_build.refuse_foreign_torchao(cell, res.chosen, WheelhouseError)
    lock = read_lock(directory)
    if lock is None:
        raise WheelhouseError(
            f"cell {cell.name}: wheelhouse {directory} has no {LOCK_NAME}: builds install only "
            f"hash-locked wheels; write it with "
            f"`trainimg wheelhouse {cell.name} --dest {directory}`"
        )
    out = []
    bad = []
    for w in res.chosen:
        sha = sha256_file(w.path)
        want = lock.get(w.path.name)
        if want is None:
            bad.append(f"{w.path.name} is not listed in {LOCK_NAME}")
        elif want != sha:
            bad.append(f"{w.path.name}: sha256 {sha[:16]}… but {LOCK_NAME} says {want[:16]}…")
        out.append(Locked(w.path, w.name, w.version, sha, wheel_groups.group_of(w.name, cell)))
    if bad:
        raise WheelhouseError(
            f"cell {cell.name}: wheelhouse {directory / LOCK_NAME} fails its hash check: "
            + "; ".join(bad)
        )
    return Selection(directory, tuple(out), wheel_groups.groups(cell))


# --- filling a wheelhouse --------------------------------------------------------------------

Runner = Callable[[list[str]], "subprocess.CompletedProcess[str]"]
PIP_TIMEOUT_S = 3600


def streamed_runner(progress: Progress, dest: Path) -> Runner:
    """`pip download` with its lines (Collecting, Downloading NAME (SIZE), Saved) shown as
    they come and a heartbeat of the wheels that have arrived in `dest`; what it returns
    carries the tail of the output as its stderr."""

    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        before = {p.name for p in dest.glob("*.whl")}

        def arrived() -> str:
            new = [p for p in dest.glob("*.whl") if p.name not in before]
            return f"{len(new)} wheel(s), {size(sum(p.stat().st_size for p in new))} in {dest}"

        step = progress.begin("pip download", arrived)
        try:
            done = run_streamed(argv, step, timeout=PIP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            step.end()
            raise WheelhouseError(f"pip download did not finish in {PIP_TIMEOUT_S} s") from None
        except BaseException:
            step.end()
            raise
        step.end(f"{'done' if done.returncode == 0 else 'failed'}: {arrived()}")
        return subprocess.CompletedProcess(argv, done.returncode, "", done.tail_text)

    return run


@dataclass(frozen=True)
class FillReport:
    copied: tuple[str, ...]
    downloaded: tuple[str, ...]
    present: tuple[str, ...]
    lock: Path


def pip_download_argv(
    cell: Cell,
    reqs: Sequence[PinnedRequirement],
    dest: Path,
    find_links: Sequence[Path],
    index_url: str,
) -> list[str]:
    """pip download of `reqs` and all their dependencies, as pip inside the cell resolves them."""
    argv = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",  # a pipe, not a terminal: pip's own lines say each wheel and its size
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
    torch = next((r for r in reqs if r.name == "torch"), None)
    local = torch.version.local if torch is not None else None
    if local:  # a build only PyTorch's own index has (+cpu, +cu128)
        argv += ["--extra-index-url", torch_builds.index_for(local)]
    for plat in platforms(cell):
        argv += ["--platform", plat]
    argv += ["--platform", "any"]
    for link in find_links:
        argv += ["--find-links", str(link)]
    return argv + [str(r) for r in reqs]


def _copy_missing(
    dest: Path, missing: Sequence[closure.Missing], tags: frozenset[Tag], links: Sequence[Path]
) -> list[str]:
    """Copy into `dest` every wheel of `links` that could satisfy a missing requirement."""
    wanted = {m.name: PackagingRequirement(m.requirement).specifier for m in missing}
    copied = []
    for link in links:
        if not link.is_dir():
            continue
        for w in scan(link):
            spec = wanted.get(w.name)
            if spec is None or not spec.contains(w.version, prereleases=True):
                continue
            if w.tags & tags and not (dest / w.path.name).exists():
                _copy(w.path, dest / w.path.name)
                copied.append(w.path.name)
    return copied


def fill(
    dest: Path,
    cells: Sequence[Cell],
    project: Project,
    *,
    find_links: Sequence[Path] = (),
    index_url: str = PYPI,
    offline: bool = False,
    run: Runner | None = None,
    log: Callable[[str], None] = lambda _m: None,
    progress: Progress = SILENT,
) -> FillReport:
    """Make `dest` hold every cell's whole closure: copy from `find_links` directories first,
    `pip download` (with dependencies) the rest unless offline, then (re)write wheelhouse.lock.
    Existing files that disagree with an existing lock are an error, never silently replaced."""
    dest.mkdir(parents=True, exist_ok=True)
    run = run or streamed_runner(progress, dest)
    old_lock = read_lock(dest) or {}
    copied: list[str] = []
    downloaded: list[str] = []
    present: list[str] = []
    for cell in cells:
        tags = supported_tags(cell)
        res = cell_closure(dest, cell)
        if not res.missing:
            present += [w.path.name for w in res.chosen]
            continue
        while res.missing:  # local wheels first; each copy may reveal further dependencies
            more = _copy_missing(dest, res.missing, tags, find_links)
            if not more:
                break
            log(f"copied {', '.join(more)}")
            copied += more
            res = cell_closure(dest, cell)
        if res.missing and offline:
            raise WheelhouseError(
                f"cell {cell.name}: no wheel for {'; '.join(map(str, res.missing))} in {dest} or "
                f"{', '.join(map(str, find_links)) or 'any --find-links directory'} (offline)"
            )
        if res.missing:
            reqs = requirements(cell)
            before = {p.name for p in dest.glob("*.whl")}
            log(f"pip download {' '.join(map(str, reqs))} and their dependencies")
            proc = run(pip_download_argv(cell, reqs, dest, find_links, index_url))
            if proc.returncode != 0:
                tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-12:])
                raise WheelhouseError(f"pip download for cell {cell.name} failed:\n{tail}")
            downloaded += sorted({p.name for p in dest.glob("*.whl")} - before)
            res = cell_closure(dest, cell)
            if res.missing:
                raise WheelhouseError(
                    f"cell {cell.name}: pip download finished but the closure still lacks "
                    f"{'; '.join(map(str, res.missing))}"
                )
    hashes: dict[str, str] = {}
    wheels = sorted(dest.glob("*.whl"))
    with progress.step("hash the wheels", lambda: f"{len(hashes)} of {len(wheels)} hashed"):
        for path in wheels:
            _hash_into(hashes, path, old_lock, dest)
    lock = write_lock(dest, hashes)
    return FillReport(tuple(copied), tuple(downloaded), tuple(dict.fromkeys(present)), lock)


def _hash_into(hashes: dict[str, str], path: Path, old_lock: dict[str, str], dest: Path) -> None:
    """The file's sha256 into `hashes`; one that disagrees with the old lock is an error."""
    sha = sha256_file(path)
    if path.name in old_lock and old_lock[path.name] != sha:
        raise WheelhouseError(
            f"{dest / path.name}: sha256 {sha[:16]}… but {LOCK_NAME} says "
            f"{old_lock[path.name][:16]}…; remove the file (or the lock entry) and fill again"
        )
    hashes[path.name] = sha


def _copy(src: Path, dst: Path) -> None:
    """Hard-link (same file system: no second copy of GBs of wheels) or copy, through a
    temporary name, so an interrupted copy never looks like a wheel. The lock still pins the
    bytes: a later change to either name fails the hash check."""
    fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", dir=dst.parent)
    os.close(fd)
    try:
        Path(tmp).unlink()
        try:
            os.link(src, tmp)
        except OSError:
            shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if exc.filename is None:  # a full disk names no file: name the wheel
            raise OSError(exc.errno, exc.strerror, str(dst)) from exc
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
