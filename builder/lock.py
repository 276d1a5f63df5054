"""images/lock.json: the record of what was built, per cell (schema 1, docs/build.md).

    {"schema": 1, "cells": {"<cell>": {"image_id", "tags", "digest", "size", "base_image",
     "base_digest", "labels", "torch", "cuda", "engine", "built_at", "content_hash"}}}

Written only after a cell's build and tags succeeded, one cell at a time, atomically (temp file,
fsync, rename, fsync of the directory): a failed or interrupted build leaves the previous record
as it was. Keys are sorted, so the file diffs cleanly when committed.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from builder.errors import TrainimgError
from builder.render import atomic_write

SCHEMA = 1
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
    content_hash: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BuildRecord:
        keys = set(cls.__dataclass_fields__)
        absent = keys - data.keys()
        if absent:
            raise LockFileError(f"lock record lacks {', '.join(sorted(absent))}")
        return cls(**{k: data[k] for k in keys})


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
    if (
        not isinstance(data, dict)
        or data.get("schema") != SCHEMA
        or not isinstance(data.get("cells"), dict)
    ):
        raise LockFileError(f"{path}: not a trainimg lock (schema {SCHEMA} with `cells`)")
    try:
        return {name: BuildRecord.from_json(rec) for name, rec in data["cells"].items()}
    except (LockFileError, TypeError) as exc:
        raise LockFileError(f"{path}: {exc}") from None


def dumps(records: dict[str, BuildRecord]) -> str:
    cells = {name: records[name].to_json() for name in sorted(records)}
    return json.dumps({"schema": SCHEMA, "cells": cells}, indent=2, sort_keys=True) + "\n"


def update(path: Path, cell: str, record: BuildRecord) -> None:
    """Set one cell's record, keeping every other cell's as it is on disk now."""
    with _LOCK:
        records = read(path)
        records[cell] = record
        atomic_write(path, dumps(records))
        _fsync_dir(path.parent)


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
