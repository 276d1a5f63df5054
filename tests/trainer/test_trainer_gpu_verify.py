"""scripts/gpu-verify.sh fits a lent GPU machine (issue 35): its `--dry-run` runs the same script
on the CPU with tiny sizes; the output must fit what the device tool brings back (at most 8
files of 16 MiB under $OUT, no checkpoints) and keep its schema; a step that runs out of its
deadline is a recorded result, never a crash."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.trainer.trainer_helpers import REPO, subprocess_env

pytestmark = pytest.mark.integration  # it trains, in processes

MAX_FILES = 8
MAX_BYTES = 16 * 2**20
OUTCOMES = {"passed", "failed", "timeout", "skipped"}


def _verify(out: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "scripts/gpu-verify.sh", "--dry-run"],
        capture_output=True, text=True, timeout=400, cwd=REPO, check=False,
        env=subprocess_env() | {"PYTHON": sys.executable, "OUT": str(out)} | env,
    )  # fmt: skip


def _fits(out: Path) -> dict[str, Any]:
    files = [p for p in out.rglob("*") if p.is_file()]
    assert 0 < len(files) <= MAX_FILES, files
    assert all(p.stat().st_size <= MAX_BYTES for p in files)
    assert not [p for p in files if p.suffix in {".pt", ".pth", ".safetensors"}], files
    doc: dict[str, Any] = json.loads((out / "gpu-verify.json").read_text())
    assert {"date", "dry_run", "gpu", "torchao", "budget_s", "wall_s", "results", "summary"} <= set(
        doc
    )
    for row in doc["results"]:
        assert set(row) == {"check", "outcome", "detail", "seconds"}, row
        assert row["outcome"] in OUTCOMES, row
    assert sum(doc["summary"].values()) == len(doc["results"])
    assert doc["wall_s"] <= doc["budget_s"]
    return doc


def test_dry_run_passes_and_its_output_fits_the_device_limits(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = _verify(out)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = _fits(out)
    assert doc["dry_run"] is True and doc["summary"]["failed"] == 0
    checks = {r["check"]: r["outcome"] for r in doc["results"]}
    assert checks["train_compare_bf16_fp8"] == "passed"
    assert checks["train_fp8_fwd_resume"] == "passed" and checks["gpu_bench"] == "passed"
    assert sorted(p.name for p in out.iterdir()) == [
        "compare_bf16_vs_fp8.json",
        "gpu-verify.json",
        "gpu_bench.json",
    ]
    bench = json.loads((out / "gpu_bench.json").read_text())
    assert [r["preset"] for r in bench["results"]] == ["bf16", "fp8-fwd", "fp8", "fp8-rowwise"]
    assert all(r["ok"] and r["tokens_per_s"] > 0 for r in bench["results"])
    assert bench["results"][3]["fp8_layers"] > 0


def test_a_step_past_its_deadline_is_recorded_and_the_json_still_written(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = _verify(out, BUDGET="30", STEPS="500")  # 500 CPU FP8 steps cannot fit in 30 s
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    doc = _fits(out)
    rows = {r["check"]: r for r in doc["results"]}
    compare = rows["train_compare_bf16_fp8"]
    assert compare["outcome"] == "timeout" and "timed out after" in compare["detail"], compare
    assert rows["gpu_bench"]["outcome"] == "timeout"  # not started: the budget was spent
    assert doc["summary"]["timeout"] >= 2
