"""Every FP8 recipe x backward dtype trains on the CPU (issue 35): tensorwise, rowwise,
rowwise_with_gw_hp and, where this torchao has it, mxfp8; FP8 (E4M3) and BF16 gradients; eager
and compiled; single process, DDP and FSDP2. torchao's own emulation runs the float8 GEMMs
(tests/trainer/emulated_fp8.py) so the matrix stays cheap; one run of the combination that
crashed (row-wise with FP8 gradients) goes through the real CPU torch._scaled_mm."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.trainer import emulated_fp8
from tests.trainer.trainer_helpers import QUICK, REPO, RunCli, losses, records, subprocess_env
from trainer.errors import EXIT_BAD_INPUT
from trainer.fp8 import mxfp8, torchao_backend
from trainer.fp8_names import Recipe

pytestmark = pytest.mark.integration  # every test here trains

MX_OK = mxfp8.module_problem() is None
RECIPES = ["tensorwise", "rowwise", "rowwise_with_gw_hp"] + (["mxfp8"] if MX_OK else [])
BACKWARDS = ["fp8_e4m3", "bf16"]
# 3 short steps: a tiny model, 2 x 32 tokens (a multiple of MXFP8's block of 32); the tiny
# model's ffn 176 is not a multiple of 32, 192 is.
SMALL = (*QUICK, "--steps", "3", "--seq-len", "32", "--batch-size", "2")
SHAPE = ("--set", "model.ffn_dim=192")


def _args(recipe: str, backward: str) -> tuple[str, ...]:
    preset = "mxfp8" if recipe == "mxfp8" else "fp8"
    return ("--preset", preset, "--fp8-recipe", recipe, "--backward-matmul", backward)


@pytest.fixture
def emulated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torchao_backend, "convert_float8", emulated_fp8.emulated)


def _trained(metrics: Path, recipe: str) -> None:
    (summary,) = records(metrics, "summary")
    assert summary["status"] == "completed" and summary["fp8_layers"] > 0, summary
    curve = losses(metrics)
    assert all(math.isfinite(v) for v in curve.values()), curve
    assert curve[max(curve)] < curve[min(curve)], curve


def test_torchaos_recipe_gets_torchaos_own_name(torchao: None) -> None:
    """The crash: torchao's from_recipe_name tests `type(name) == str`, which a StrEnum member
    fails, and fell through to `unknown recipe_name rowwise`."""
    config = torchao_backend.recipe_config(Recipe.ROWWISE)
    assert config.round_scales_to_power_of_2
    assert str(config.cast_config_grad_output.scaling_granularity).endswith("AXISWISE")
    hp = torchao_backend.recipe_config(Recipe.ROWWISE_WITH_GW_HP)
    assert str(hp.cast_config_input_for_grad_weight.scaling_type).endswith("DISABLED")


@pytest.mark.parametrize("backward", BACKWARDS)
@pytest.mark.parametrize("recipe", RECIPES)
def test_every_recipe_and_backward_trains_or_is_refused_by_name(
    run_cli: RunCli, tmp_path: Path, emulated: None, recipe: str, backward: str
) -> None:
    metrics = tmp_path / "m.jsonl"
    res = run_cli("train", *SMALL, *SHAPE, *_args(recipe, backward), "--metrics-file", str(metrics))
    if recipe == "mxfp8" and backward == "bf16":  # MXFP8 casts every GEMM (precision.problems)
        assert res.code == EXIT_BAD_INPUT and "set backward_matmul fp8_e4m3" in res.err, res.err
        return
    assert res.code == 0, res.err
    assert f"via torchao ({recipe})" in res.out
    _trained(metrics, recipe)


def test_rowwise_with_fp8_gradients_trains_through_the_real_cpu_scaled_mm(
    run_cli: RunCli, tmp_path: Path, torchao: None
) -> None:
    """The issue's command line, not emulated."""
    metrics = tmp_path / "m.jsonl"
    res = run_cli("train", *SMALL, *_args("rowwise", "fp8_e4m3"), "--metrics-file", str(metrics))
    assert res.code == 0, res.err
    _trained(metrics, "rowwise")


@pytest.mark.skipif(shutil.which("cc") is None, reason="torch.compile needs a C compiler")
def test_rowwise_with_fp8_gradients_trains_compiled(
    run_cli: RunCli, tmp_path: Path, emulated: None
) -> None:
    metrics = tmp_path / "m.jsonl"
    res = run_cli(
        "train", *SMALL, *_args("rowwise", "fp8_e4m3"), "--compile", "--metrics-file", str(metrics)
    )
    assert res.code == 0, res.err
    assert "torch.compile on" in res.out
    _trained(metrics, "rowwise")


def _torchrun(*argv: str) -> subprocess.CompletedProcess[str]:
    launch = ("-m", "trainer.launch", "--standalone", "--nproc_per_node", "2")
    return subprocess.run(
        [sys.executable, *launch, "-m", "tests.trainer.emulated_fp8", *argv],
        capture_output=True,
        text=True,
        timeout=180,
        env=subprocess_env(),
        cwd=REPO,
        check=False,
    )


@pytest.mark.parametrize(
    ("parallel", "recipe"), [("ddp", "rowwise"), ("fsdp", "rowwise_with_gw_hp")]
)
def test_rowwise_fp8_gradients_train_data_parallel(
    tmp_path: Path, torchao: None, parallel: str, recipe: str
) -> None:
    metrics = tmp_path / "m.jsonl"
    proc = _torchrun(
        "train", *SMALL, *_args(recipe, "fp8_e4m3"), "--batch-size", "4",
        "--parallel", parallel, "--metrics-file", str(metrics),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    (summary,) = records(metrics, "summary")
    assert summary["world_size"] == 2
    _trained(metrics, recipe)
