"""Image impact: where preflight's images come from (the matrix, the lock, the host's local
images) and what a driver change does to each (the change, the impact check's severity)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.facts.driver_version import DriverVersion
from builder.host.parsers import LocalImage, podman_inspect
from builder.judgement.finding import Finding
from builder.judgement.image import ImageVerdict
from builder.judgement.severity import BLOCK, OK, SKIP, WARN
from builder.preflight import images as img
from builder.preflight.impact import Row, impact_check
from tests.judgement.images import CU128_ARCHES, gpu, image, nvidia_12_8_1, on
from tests.preflight.fakehost import FIXTURES


def test_local_images_from_the_h100_fixture() -> None:
    inspected = podman_inspect((FIXTURES / "el9-h100" / "out" / "podman-inspect.txt").read_text())
    records, skipped = img.from_local(inspected)
    assert skipped == 1  # the plain Rocky base asks for no GPU
    ours, nvidia = records
    assert ours.cell == "rocky9-cu128-py3.12-torch2.11.0-runtime" and ours.arch_list == CU128_ARCHES
    assert nvidia.requirements == (nvidia_12_8_1(),) and nvidia.arch_list is None
    disabled = LocalImage(
        "ab" * 32, ("x",), {}, {"CUDA_VERSION": "12.8.1", "NVIDIA_DISABLE_REQUIRE": "true"}
    )
    rec = img.from_local([disabled])[0][0]
    assert rec.disable_require and rec.requirements == ("cuda>=12.8",)
    v = on(rec, "570.124.06", (gpu("h100"),))
    assert "require.disabled" in v.codes


def test_lock_is_read_tolerantly(tmp_path: Path, matrix_images: list[img.ImageRecord]) -> None:
    missing, notes = img.from_lock(tmp_path / "lock.json")
    assert missing == [] and "cannot read" in notes[0]
    bad = tmp_path / "bad.json"
    bad.write_text("{ not json")
    assert "not JSON" in img.from_lock(bad)[1][0]
    noschema = tmp_path / "odd.json"
    noschema.write_text(json.dumps({"schema": 9}))
    assert "no `cells` mapping (schema 9)" in img.from_lock(noschema)[1][0]
    cell = matrix_images[0].cell
    lock = tmp_path / "lock.json"
    lock.write_text(json.dumps({"schema": 1, "cells": {
        cell: {"image_id": "sha256:1", "tags": [f"localhost/trainimg:{cell}"], "cuda": "12.8.1",
               "labels": {"io.trainimg.cuda.arch-list": "sm_90", "io.trainimg.cell": cell}},
        "old-cell": {"tags": [], "cuda": "12.8.1"},
        "broken-record": "nope",
    }}))  # fmt: skip
    records, notes = img.from_lock(lock)
    assert [r.cell for r in records] == [cell, "old-cell"]
    assert "cells.broken-record is not an object" in notes[0]
    assert records[0].requirement_origin.startswith("derived from CUDA 12.8.1")
    merged = img.merge(matrix_images, records)
    first = merged[0]
    assert first.source == "matrix+lock" and first.arch_list == ("sm_90",)  # what was built
    assert merged[-1].cell == "old-cell" and merged[-1].source == "lock"
    assert len(merged) == len(matrix_images) + 1


_SEVERE = {"ok": None, "fwd-compat": ("fwd.compat", WARN), "broken": ("require.unsatisfied", BLOCK)}


def verdict(status: str) -> ImageVerdict:
    how = _SEVERE.get(status)
    found = (Finding("image.compat", how[1], status, reason=how[0]),) if how else ()
    return ImageVerdict(status, found)


def row(now: str, after: str | None) -> Row:
    return Row(image(), verdict(now), verdict(after) if after else None)


@pytest.mark.parametrize(
    ("now", "after", "change"),
    [
        ("ok", "broken", "breaks"),
        ("ok", "fwd-compat", "degrades"),
        ("broken", "ok", "starts working"),
        ("fwd-compat", "ok", "improves"),
        ("ok", "ok", "unchanged"),
        ("no-driver", "ok", "new"),
        ("ok", None, ""),
    ],
)
def test_change(now: str, after: str | None, change: str) -> None:
    assert row(now, after).change == change


def test_impact_check_severity() -> None:
    target = DriverVersion("570.124.06")
    assert impact_check([row("ok", "ok")], target, []).severity is OK
    assert impact_check([row("ok", "fwd-compat")], target, []).severity is WARN
    breaks = impact_check([row("ok", "broken"), row("ok", "ok")], target, [])
    assert breaks.severity is BLOCK and "1 work now and break" in breaks.message
    assert breaks.reason == "require.unsatisfied"  # the fleet counts hosts per reason code
    assert impact_check([row("no-driver", None)], None, []).severity is SKIP
    assert impact_check([], target, ["no matrix"]).severity is SKIP
