"""images/lock.json: the schema other parts read, one cell at a time, never half-written."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest

from builder.build import lock
from builder.build.lock import BuildRecord, LockFileError

KEYS = {"image_id", "tags", "digest", "size", "base_image", "base_digest", "labels", "torch",
        "cuda", "engine", "built_at", "build_hash", "pushed", "wheels", "parent",
        "packages"}  # fmt: skip


def record(image: str = "sha256:" + "a" * 64, chash: str = "0123456789abcdef") -> BuildRecord:
    return BuildRecord(
        image_id=image,
        tags=["localhost/trainimg:cell", f"localhost/trainimg:{chash}"],
        digest="sha256:" + "d" * 64,
        size=1_180_000_000,
        base_image="localhost/trainimg-base:bookworm",
        base_digest=None,
        labels={"io.trainimg.cell": "cell"},
        torch="2.13.0+cpu",
        cuda=None,
        engine="podman",
        built_at="2026-01-01T00:00:00Z",
        build_hash=chash,
    )


def test_schema(tmp_path: Path) -> None:
    path = tmp_path / "images" / "lock.json"
    lock.update(path, "cell", record())
    data = json.loads(path.read_text())
    assert data["schema"] == 1
    assert set(data["cells"]["cell"]) == KEYS
    assert lock.read(path) == {"cell": record()}


def test_update_keeps_other_cells(tmp_path: Path) -> None:
    path = tmp_path / "lock.json"
    lock.update(path, "one", record())
    lock.update(path, "two", record("sha256:" + "b" * 64))
    lock.update(path, "one", record("sha256:" + "c" * 64))
    got = lock.read(path)
    assert got["one"].image_id == "sha256:" + "c" * 64
    assert got["two"].image_id == "sha256:" + "b" * 64
    assert list(json.loads(path.read_text())["cells"]) == ["one", "two"]


def test_failed_write_leaves_previous_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "lock.json"
    lock.update(path, "one", record())
    before = path.read_bytes()

    def boom(src: str, dst: str) -> None:
        raise KeyboardInterrupt  # Ctrl-C at the worst moment: after the temp file is written

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        lock.update(path, "two", record("sha256:" + "b" * 64))
    monkeypatch.undo()
    assert path.read_bytes() == before
    # no temp file left (lock.json.lock is the fcntl lock's, empty)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lock.json", "lock.json.lock"]


def test_absent_is_empty_and_garbage_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "lock.json"
    assert lock.read(path) == {}
    path.write_text("{not json")
    with pytest.raises(LockFileError, match="unreadable"):
        lock.read(path)
    path.write_text(json.dumps({"schema": "one", "cells": {}}))
    with pytest.raises(LockFileError, match="schema 1"):
        lock.read(path)
    path.write_text(json.dumps({"schema": 1, "cells": {"c": {"image_id": "x"}}}))
    with pytest.raises(LockFileError, match="lacks"):
        lock.read(path)


def test_a_lock_of_a_newer_schema_is_refused_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "lock.json"
    newer = json.dumps({"schema": 2, "cells": {}, "future": True}) + "\n"
    path.write_text(newer)
    with pytest.raises(LockFileError, match=r"lock.json: written by a newer trainimg .*schema 2"):
        lock.update(path, "cell", record())
    assert path.read_text() == newer


def test_an_old_record_without_pushed_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "lock.json"
    old = record().to_json()
    del old["pushed"]
    path.write_text(json.dumps({"schema": 1, "cells": {"cell": old}}))
    assert lock.read(path)["cell"].pushed == {}


OLD_LOCK = Path(__file__).parents[1] / "data" / "lock" / "old_content_hash.json"


def test_an_old_lock_with_content_hash_reads_and_is_rewritten_with_build_hash(
    tmp_path: Path,
) -> None:
    """images/lock.json as committed before the build hash had its name: the record's
    `content_hash` is its build hash (the image's tag), and the next write keeps only the new
    field, in every record, the untouched ones included."""
    path = tmp_path / "lock.json"
    path.write_bytes(OLD_LOCK.read_bytes())
    old = json.loads(path.read_text())["cells"]
    (name,) = old
    got = lock.read(path)[name]
    assert got.build_hash == old[name]["content_hash"] == "c04d925ddff28747"
    assert f"localhost/trainimg:{got.build_hash}" in got.tags
    assert got.labels["io.trainimg.build.hash"] == got.build_hash
    lock.update(path, "other", record())
    cells = json.loads(path.read_text())["cells"]
    assert all("content_hash" not in rec and "build_hash" in rec for rec in cells.values())
    assert cells[name]["build_hash"] == "c04d925ddff28747"
    assert set(cells[name]) == KEYS
    assert lock.read(path)[name] == got


def test_a_record_with_both_names_keeps_its_build_hash(tmp_path: Path) -> None:
    path = tmp_path / "lock.json"
    both = {**record().to_json(), "content_hash": "ffffffffffffffff"}
    path.write_text(json.dumps({"schema": 1, "cells": {"cell": both}}))
    assert lock.read(path)["cell"].build_hash == record().build_hash


def _writer(path: str, writer: int, count: int) -> None:
    for i in range(count):
        lock.update(Path(path), f"w{writer}-{i:03d}", record(chash=f"{writer:04d}{i:012d}"))


@pytest.mark.parametrize("writers", [2, 4, 8])
@pytest.mark.integration
def test_concurrent_writer_processes_lose_no_record(tmp_path: Path, writers: int) -> None:
    """N processes update one lock file at once (each read-modify-write under the fcntl
    lock): every record of every writer is there afterwards."""
    path = tmp_path / "images" / "lock.json"
    count = 25
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(path), w, count)) for w in range(writers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    records = lock.read(path)
    assert len(records) == writers * count  # lost: 0
    assert records["w0-000"].build_hash == "0000000000000000"
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".lock.json.")]
