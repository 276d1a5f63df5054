"""A cell's build context and its build hash.

The context is what docs/architecture.md promises: `Containerfile` (the rendered one, as
committed), `trainer/` (a copy of the package, caches left out) and `wheelhouse/` (only the wheels
this cell needs, or empty). It is written as a deterministic tarball (sorted, uid/gid 0, mtime
0, modes 644/755) so the trainer's COPY layer is found in the layer cache whatever the files'
timestamps in the checkout.

The build hash covers everything the image depends on: every context file's name, mode and
sha256, the build arguments, the build-time labels and the base image's id. The cell's own
`io.trainimg.cell.hash` label covers only its matrix values; this one also changes when the
trainer, the templates or a wheel change. It names the image: `<repo>:<build hash>`.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import IO

from builder.build.wheelhouse import Selection
from builder.errors import TrainimgError

CONTAINERFILE = "Containerfile"
REQUIREMENTS = "requirements.txt"
HASH_LEN = 16
IGNORED_DIRS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
IGNORED_SUFFIXES = (".pyc", ".pyo")


class ContextError(TrainimgError):
    pass


@dataclass(frozen=True)
class ContextEntry:
    arcname: str
    mode: int
    sha256: str = ""  # "" for a directory
    source: Path | None = None  # a file on disk, or
    data: bytes | None = None  # bytes in memory

    @property
    def is_dir(self) -> bool:
        return self.source is None and self.data is None


def _file_entry(arcname: str, path: Path) -> ContextEntry:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
    return ContextEntry(arcname, mode, h.hexdigest(), source=path)


def trainer_entries(trainer_dir: Path) -> list[ContextEntry]:
    if not (trainer_dir / "__main__.py").is_file():
        raise ContextError(
            f"{trainer_dir}/__main__.py is missing: the image's entrypoint is `python -m trainer`"
        )
    out = [ContextEntry("trainer", 0o755)]
    for path in sorted(trainer_dir.rglob("*")):
        rel = path.relative_to(trainer_dir)
        if any(part in IGNORED_DIRS for part in rel.parts) or path.name.endswith(IGNORED_SUFFIXES):
            continue
        arcname = f"trainer/{rel.as_posix()}"
        if path.is_symlink():
            raise ContextError(f"{path} is a symbolic link: the trainer must be plain files")
        if path.is_dir():
            out.append(ContextEntry(arcname, 0o755))
        elif path.is_file():
            out.append(_file_entry(arcname, path))
    return out


def wheel_entries(selection: Selection | None) -> list[ContextEntry]:
    """wheelhouse/<group>/ per install group: its wheels and the requirements.txt derived from
    the lock. The Containerfile COPYs each group before installing it, so any changed hash
    changes that COPY and every layer after it."""
    out = [ContextEntry("wheelhouse", 0o755)]
    if selection is None:
        return out
    for group in selection.groups:
        out.append(ContextEntry(f"wheelhouse/{group}", 0o755))
        data = selection.requirements_txt(group).encode("utf-8")
        sha = hashlib.sha256(data).hexdigest()
        out.append(ContextEntry(f"wheelhouse/{group}/{REQUIREMENTS}", 0o644, sha, data=data))
        out += [
            ContextEntry(f"wheelhouse/{group}/{w.path.name}", 0o644, w.sha256, source=w.path)
            for w in selection.in_group(group)
        ]
    return out


@dataclass(frozen=True)
class BuildContext:
    entries: tuple[ContextEntry, ...]
    buildargs: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    base: str = ""  # the base image's id (or its reference when it is not in the store yet)

    @cached_property
    def build_hash(self) -> str:
        identity = {
            "format": 1,
            "entries": [[e.arcname, e.mode, e.sha256] for e in self.entries],
            "buildargs": dict(sorted(self.buildargs.items())),
            "labels": dict(sorted(self.labels.items())),
            "base": self.base,
        }
        blob = json.dumps(identity, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()[:HASH_LEN]

    @property
    def size(self) -> int:
        total = 0
        for e in self.entries:
            if e.data is not None:
                total += len(e.data)
            elif e.source is not None:
                total += e.source.stat().st_size
        return total

    def write_tar(self, out: IO[bytes]) -> None:
        """Write the tarball; each file is hashed again as it is read, so what is uploaded is
        exactly what was hashed (a wheel changed underneath is an error, not a wrong image)."""
        with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for e in self.entries:
                info = tarfile.TarInfo(e.arcname)
                info.uid = info.gid = 0
                info.mtime = 0
                info.mode = e.mode
                if e.is_dir:
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                    continue
                if e.data is not None:
                    info.size = len(e.data)
                    tar.addfile(info, io.BytesIO(e.data))
                    continue
                assert e.source is not None
                info.size = e.source.stat().st_size
                with e.source.open("rb") as fh:
                    reader = _Hashing(fh, e)
                    tar.addfile(info, reader)
                reader.check()

    def tarball(self, directory: Path) -> Path:
        """The context as a temporary tar file in `directory`; the caller removes it."""
        directory.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=".context-", suffix=".tar", dir=directory)
        path = Path(name)
        try:
            with open(fd, "wb") as fh:
                self.write_tar(fh)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        return path


class _Hashing:
    """A file wrapper that hashes what tarfile reads from it."""

    def __init__(self, fh: IO[bytes], entry: ContextEntry) -> None:
        self._fh = fh
        self._entry = entry
        self._h = hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        chunk = self._fh.read(n)
        self._h.update(chunk)
        return chunk

    def check(self) -> None:
        if self._h.hexdigest() != self._entry.sha256:
            where = self._entry.source or self._entry.arcname
            raise ContextError(f"{where} changed while the build context was being written")


def assemble(
    containerfile: str,
    trainer_dir: Path,
    selection: Selection | None,
    *,
    buildargs: Mapping[str, str],
    labels: Mapping[str, str],
    base: str,
) -> BuildContext:
    data = containerfile.encode("utf-8")
    entries = [ContextEntry(CONTAINERFILE, 0o644, hashlib.sha256(data).hexdigest(), data=data)]
    entries += trainer_entries(trainer_dir)
    entries += wheel_entries(selection)
    return BuildContext(tuple(entries), dict(buildargs), dict(labels), base)
