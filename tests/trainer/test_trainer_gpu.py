"""GPU-only checks: skipped with a reason on machines without CUDA (never passed vacuously)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from tests.trainer.trainer_helpers import QUICK, RunCli, records
from trainer.fp8 import rules

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs an NVIDIA GPU (CUDA unavailable)"
    ),
]


def _cc() -> tuple[int, int]:
    major, minor = torch.cuda.get_device_capability(0)
    return major, minor


def test_fp8_fwd_trains_on_the_gpu_or_is_refused_by_name(run_cli: RunCli, tmp_path: Path) -> None:
    metrics = tmp_path / "m.jsonl"
    res = run_cli(
        "train", *QUICK, "--device", "cuda", "--steps", "8", "--metrics-file", str(metrics)
    )
    name = torch.cuda.get_device_name(0)
    if rules.device_problem(name, _cc(), "tensorwise") is not None:
        assert res.code == 2 and name in res.err
        return
    assert res.code == 0, res.err
    train = records(metrics)
    assert train[-1]["loss"] < train[0]["loss"]
    assert train[-1]["peak_mem_kind"] == "cuda_max_allocated"


def test_rowwise_is_refused_exactly_where_the_rules_say(run_cli: RunCli) -> None:
    res = run_cli("train", *QUICK, "--device", "cuda", "--steps", "2", "--fp8-recipe", "rowwise")
    problem = rules.device_problem(torch.cuda.get_device_name(0), _cc(), "rowwise")
    if problem is not None:  # refused before training, with the rules' own reason
        assert res.code == 2 and problem in res.err, res.err
    else:  # any other exit (a numerical stop, an OOM, a crash) is a failure, not "not refused"
        assert res.code == 0, res.err


@pytest.mark.skipif(
    importlib.util.find_spec("transformer_engine") is None,
    reason="Transformer Engine not installed",
)
def test_transformer_engine_backend(run_cli: RunCli) -> None:
    res = run_cli(
        "train",
        *QUICK,
        "--device",
        "cuda",
        "--preset",
        "fp8",
        "--steps",
        "4",
        "--fp8-backend",
        "transformer_engine",
    )
    assert res.code == 0, res.err
