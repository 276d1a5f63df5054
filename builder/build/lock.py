"""images/lock.json: the record of what was built, per cell (schema 1, docs/build.md).

    {"schema": 1, "cells": {"<cell>": {"image_id", "tags", "digest", "size", "base_image",
     "base_digest", "labels", "torch", "cuda", "engine", "built_at", "build_hash",
     "pushed": {"<registry>/<repo>:<tag>": "sha256:..."},
     "wheels": {"<name>==<version>": "<sha256>"}, "parent": {"cell", "image_id", "digest"}}}}

Written only after a cell's build and tags succeeded (or its push), one cell at a time,
atomically (temp file, fsync, rename, fsync of the directory): a failed or interrupted build
leaves the previous record as it was. Every read-modify-write holds an exclusive fcntl lock on
`<lock>.lock`, so concurrent trainimg processes (and threads) never lose each other's records.
Keys are sorted, so the file diffs cleanly when committed. A file of a newer schema is refused,
never rewritten. A record written before the build hash had its name (its `content_hash`) is
read as its `build_hash`; the next write writes `build_hash` only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from builder.atomic_file import atomic_write
from builder.errors import TrainimgError

LOCK_SCHEMA = 1
OLD_FIELDS = {"content_hash": "build_hash"}  # a field's old name -> its name now
DEFAULT_PATH = Path("images") / "lock.json"
_LOCK = threading.Lock()  # one writer at a time within a process (--jobs)


class LockFileError(TrainimgError):
    pass


@dataclass(frozen=True)
class BuildRecord:
    image_id: str
    tags: list[str]
    digest: str | None
    size: int
    base_image: str
    base_digest: str | None
    labels: dict[str, str]
    torch: str
    cuda: str | None
    engine: str
    built_at: str
    build_hash: str
    pushed: dict[str, str] = field(default_factory=dict)  # registry ref -> manifest digest
    # every wheel installed, as the wheelhouse lock pinned it: "name==version" -> sha256
    wheels: dict[str, str] = field(default_factory=dict)
    # an extended image (trainimg extend): the image it was built FROM
    parent: dict[str, str] | None = None
    # EL9 images: what dnf really installed (`rpm -qa`), name -> EPOCH:VERSION-RELEASE.ARCH
    packages: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BuildRecord:
        data = _migrated(data)
        fields = dataclasses.fields(cls)
        required = {
            f.name
            for f in fields
            if f.default_factory is dataclasses.MISSING and f.default is dataclasses.MISSING
        }
        absent = required - data.keys()
        if absent:
            raise LockFileError(f"lock record lacks {', '.join(sorted(absent))}")
        return cls(**{f.name: data[f.name] for f in fields if f.name in data})


def _migrated(data: dict[str, Any]) -> dict[str, Any]:
    """A record with its old field names renamed (where the new name is not there too)."""
    out = dict(data)
    for old, new in OLD_FIELDS.items():
        if old in out:
            value = out.pop(old)
            out.setdefault(new, value)
    return out


def read(path: Path) -> dict[str, BuildRecord]:
    """cell -> record; an absent file is an empty lock."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise LockFileError(
            f"{path}: unreadable ({exc}); restore it from git or delete it"
        ) from None
    schema = data.get("schema") if isinstance(data, dict) else None
    if isinstance(schema, int) and schema > LOCK_SCHEMA:
        raise LockFileError(
            f"{path}: written by a newer trainimg (lock schema {schema}; this one reads "
            f"{LOCK_SCHEMA}): upgrade trainimg; the file is left as it is"
        )
    if (
        not isinstance(data, dict)
        or schema != LOCK_SCHEMA
        or not isinstance(data.get("cells"), dict)
    ):
        raise LockFileError(f"{path}: not a trainimg lock (schema {LOCK_SCHEMA} with `cells`)")
    try:
        return {name: BuildRecord.from_json(rec) for name, rec in data["cells"].items()}
    except (LockFileError, TypeError) as exc:
        raise LockFileError(f"{path}: {exc}") from None


def dumps(records: dict[str, BuildRecord]) -> str:
    cells = {name: records[name].to_json() for name in sorted(records)}
    return json.dumps({"schema": LOCK_SCHEMA, "cells": cells}, indent=2, sort_keys=True) + "\n"


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """Exclusive access to the lock file `path` across threads and processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with _LOCK:
        fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the flock


def modify(path: Path, change: Callable[[dict[str, BuildRecord]], None]) -> None:
    """Read, change in place, write back: all under the lock."""
    with _exclusive(path):
        records = read(path)
        change(records)
        atomic_write(path, dumps(records))
        _fsync_dir(path.parent)


def update(path: Path, cell: str, record: BuildRecord) -> None:
    """Set one cell's record, keeping every other cell's as it is on disk now."""
    modify(path, lambda records: records.__setitem__(cell, record))


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
