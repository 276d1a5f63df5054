"""The prepared GPU benchmark: its preset choice, and a CPU dry run of the whole script."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.trainer.trainer_helpers import REPO, subprocess_env


def _gpu_bench() -> Any:
    spec = importlib.util.spec_from_file_location("gpu_bench", REPO / "benchmarks" / "gpu_bench.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fp8_is_dropped_with_a_reason_without_torchao_or_a_capable_gpu() -> None:
    plan = _gpu_bench().plan_presets
    assert plan("0.13.0", None) == (["bf16", "fp8-fwd", "fp8"], [])
    presets, notes = plan(None, None)
    assert presets == ["bf16"] and "torchao is not installed" in notes[0]
    presets, notes = plan("0.13.0", "FP8 needs ... A100 ...")
    assert presets == ["bf16"] and "A100" in notes[0]


@pytest.mark.integration
def test_cpu_dry_run_writes_the_table_and_json(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "benchmarks/gpu_bench.py", "--device", "cpu", "--model", "tiny",
         "--vocab", "256", "--seq-len", "64", "--batch-size", "8", "--steps", "4",
         "--no-compile", "--out", str(out)],
        capture_output=True, text=True, timeout=180, env=subprocess_env(), cwd=REPO, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "tok/s/GPU" in proc.stdout and "fp8-fwd / bf16 throughput" in proc.stdout
    report = json.loads(out.read_text())
    assert [r["preset"] for r in report["results"]] == ["bf16", "fp8-fwd", "fp8"]
    assert all(r["ok"] and r["tokens_per_s"] > 0 for r in report["results"])
    assert report["results"][1]["fp8_layers"] == 8 and report["fp8_fwd_speedup"] > 0
    assert set(report["speedups"]) == {"fp8-fwd", "fp8"}


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
@pytest.mark.integration
def test_gpu_sh_refuses_without_a_gpu() -> None:
    proc = subprocess.run(
        ["bash", "benchmarks/gpu.sh"],
        capture_output=True, text=True, timeout=60, cwd=REPO, check=False,
        env=subprocess_env() | {"PYTHON": sys.executable},
    )  # fmt: skip
    assert proc.returncode == 2 and "no CUDA-enabled torch" in proc.stderr


@pytest.mark.integration
def test_the_memory_estimate_benchmark_holds_a_row_to_its_target() -> None:
    """benchmarks/memory_estimate.py exits 0 only when every row is within 15 % of the CPU
    allocator's peak; one small row here (the full table is in docs/trainer.md)."""
    proc = subprocess.run(
        [sys.executable, "benchmarks/memory_estimate.py", "--rows", "tiny:fp8:8:64:none",
         "--steps", "2"],
        capture_output=True, text=True, timeout=180, env=subprocess_env(), cwd=REPO, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "tiny:fp8:8:64:none" in proc.stdout and "within the 15% target" in proc.stdout
