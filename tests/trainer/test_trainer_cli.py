"""The CLI contract: help, info JSON, exit codes and no tracebacks for bad input."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

import trainer
from tests.trainer.trainer_helpers import (
    QUICK,
    RunCli,
    records,
    run_module,
    signal_once_logging,
)
from trainer import checkpoint
from trainer.errors import EXIT_BAD_INPUT, EXIT_SIGINT, EXIT_SIGTERM, EXIT_STOPPED_UNSAVED

INFO_KEYS = {
    "trainer_version",
    "python",
    "torch",
    "torch_cuda",
    "cuda_available",
    "arch_flags",
    "devices",
    "fp8",
}


@pytest.mark.integration
def test_help_and_info_in_a_real_process() -> None:
    top = run_module("--help")
    assert top.returncode == 0 and "train" in top.stdout and "143" in top.stdout
    train = run_module("train", "--help")
    assert train.returncode == 0
    for flag in (
        "--config",
        "--preset",
        "--model",
        "--data",
        "--steps",
        "--ckpt-dir",
        "--resume",
        "--metrics-file",
        "--device",
        "--compare",
        "--seed",
        "exit codes",
    ):
        assert flag in train.stdout, flag
    info = run_module("info", "--json")
    assert info.returncode == 0, info.stderr
    data = json.loads(info.stdout)
    assert set(data) >= INFO_KEYS
    assert data["trainer_version"] == trainer.__version__
    assert set(data["fp8"]) == {"torchao", "transformer_engine", "scaled_mm_cpu", "mxfp8"}
    assert data["fp8"]["mxfp8"]["module"] is True  # torchao 0.18 has MXFP8 training
    assert "mxfp8" in data["presets"]
    assert data["fp8"]["scaled_mm_cpu"] is True and data["fp8"]["torchao"]
    if not data["cuda_available"]:
        assert data["devices"] == []
    if data["torch_cuda"] is None:
        assert data["arch_flags"] is None  # only CUDA builds carry an arch list


def test_info_human_readable(run_cli: RunCli) -> None:
    res = run_cli("info")
    assert res.code == 0 and "CPU FP8 GEMM yes" in res.out and "presets" in res.out


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def _corrupt_checkpoint(tmp: Path) -> str:
    ckpt = checkpoint.save(
        checkpoint.prepare_dir(str(tmp / "ck")),
        2,
        {"model": {}, "optimizer": {}, "rng": {}, "data_position": {}},
        {},
        1,
    )
    (ckpt / "state.pt").write_bytes(b"garbage")
    return str(tmp / "ck")


ArgsFor = Callable[[Path], list[str]]
BAD_INPUTS: list[tuple[str, ArgsFor, str]] = [
    (
        "unknown precision in a file",
        lambda t: ["--config", _write(t / "c.yaml", "precision:\n  forward_matmul: fp4\n")],
        "unknown value 'fp4'",
    ),
    (
        "impossible combination",
        lambda t: ["--preset", "bf16", "--backward-matmul", "fp8_e5m2"],
        "needs forward_matmul fp8_e4m3",
    ),
    ("missing data file", lambda t: ["--data", str(t / "none.bin")], "does not exist"),
    ("empty data file", lambda t: ["--data", _write(t / "empty.txt", "")], "is empty"),
    (
        "unwritable checkpoint dir",
        lambda t: ["--ckpt-dir", _write(t / "f", "") + "/sub"],
        "not writable",
    ),
    (
        "corrupt checkpoint on resume",
        lambda t: ["--ckpt-dir", _corrupt_checkpoint(t), "--resume"],
        "corrupt",
    ),
    ("sequence too long", lambda t: ["--seq-len", "65"], "exceeds the model's max_seq_len 64"),
    ("batch not divisible", lambda t: ["--batch-size", "6", "--grad-accum", "4"], "divisible"),
    (
        "fp8 gradients, odd tokens",
        lambda t: ["--preset", "fp8", "--batch-size", "1", "--seq-len", "7"],
        "not a multiple of 16",
    ),
    ("resume without a dir", lambda t: ["--resume"], "needs --ckpt-dir"),
    ("compare with one preset", lambda t: ["--compare", "bf16"], "name two presets"),
    ("compare a preset with itself", lambda t: ["--compare", "bf16,bf16"], "name two presets"),
    ("compare an unknown preset", lambda t: ["--compare", "bf16,fp4"], "unknown preset(s) fp4"),
    ("bad fault spec", lambda t: ["--inject-fault", "boom"], "expected [PRESET:]nan@STEP"),
    ("unknown --set key", lambda t: ["--set", "train.stepz=3"], "unknown key(s) stepz"),
    ("bad sensitive glob", lambda t: ["--sensitive-layers", "blocks.*.nope"], "match no module"),
    (
        "eval without a held-out split",
        lambda t: [
            "--data",
            _write(t / "c.txt", "x" * 500),
            "--eval-interval",
            "2",
            "--set",
            "data.eval_fraction=0",
        ],
        "needs a held-out split",
    ),
]


NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="CPU-only case; a GPU is visible")
CASES = [pytest.param(*case, id=case[0]) for case in BAD_INPUTS] + [
    pytest.param(
        "no CUDA", lambda t: ["--device", "cuda:3"], "CUDA is not available", marks=NO_GPU
    ),
    pytest.param(
        "TE on a CPU",
        lambda t: ["--preset", "fp8", "--fp8-backend", "transformer_engine"],
        "CUDA devices only",
        marks=NO_GPU,
    ),
]


@pytest.mark.parametrize(("name", "args", "needle"), CASES)
def test_bad_input_is_exit_2_with_a_message(
    run_cli: RunCli, tmp_path: Path, name: str, args: ArgsFor, needle: str
) -> None:
    metrics = tmp_path / "m.jsonl"
    res = run_cli("train", "--steps", "3", "--metrics-file", str(metrics), *args(tmp_path))
    assert res.code == EXIT_BAD_INPUT, (res.out, res.err)
    assert needle in res.err and "Traceback" not in res.err
    assert not metrics.exists() or not records(metrics)  # refused before training


def test_compile_without_a_c_compiler_is_refused(
    run_cli: RunCli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no cc, gcc or clang there
    monkeypatch.delenv("CC", raising=False)
    res = run_cli("train", *QUICK, "--steps", "2", "--compile")
    assert res.code == EXIT_BAD_INPUT and "needs a C compiler" in res.err


@pytest.mark.integration
def test_resume_into_a_different_model_is_refused(run_cli: RunCli, tmp_path: Path) -> None:
    ckpt = str(tmp_path / "ck")
    assert run_cli("train", *QUICK, "--steps", "4", "--stop-at", "2", "--ckpt-dir", ckpt).code == 0
    res = run_cli(
        "train", *QUICK, "--steps", "4", "--ckpt-dir", ckpt, "--resume", "--set", "model.dim=128"
    )
    assert res.code == EXIT_BAD_INPUT and "same model settings" in res.err
    res = run_cli(
        "train", *QUICK, "--steps", "4", "--ckpt-dir", ckpt, "--resume", "--preset", "fp16"
    )
    assert res.code == EXIT_BAD_INPUT and "precision.forward_matmul fp8_e4m3 -> fp16" in res.err
    # Switching the matmuls back to BF16 after FP8 trouble is allowed, by request.
    res = run_cli(
        "train", *QUICK, "--steps", "4", "--ckpt-dir", ckpt, "--resume", "--preset", "bf16"
    )
    assert res.code == EXIT_BAD_INPUT and "--resume-anyway" in res.err
    res = run_cli(
        "train",
        *QUICK,
        "--steps",
        "4",
        "--ckpt-dir",
        ckpt,
        "--resume",
        "--preset",
        "bf16",
        "--resume-anyway",
    )
    assert res.code == 0, res.err
    assert "--resume-anyway: continuing" in res.err and "fp8_e4m3 -> bf16" in res.err


@pytest.mark.integration
def test_bad_input_in_a_real_process_has_no_traceback(tmp_path: Path) -> None:
    proc = run_module("train", "--data", str(tmp_path / "missing.bin"))
    assert proc.returncode == EXIT_BAD_INPUT
    assert proc.stderr.strip().startswith("error: data file") and "Traceback" not in proc.stderr
    proc = run_module("train", "--preset", "fp9")
    assert proc.returncode == EXIT_BAD_INPUT and "invalid choice" in proc.stderr


@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGTERM, EXIT_SIGTERM), (signal.SIGINT, EXIT_SIGINT)]
)
@pytest.mark.integration
def test_signal_saves_a_loadable_checkpoint_and_exits_cleanly(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    ckpt, metrics = tmp_path / "ck", tmp_path / "m.jsonl"
    exit_code, err = signal_once_logging(
        [
            "-m",
            "trainer",
            "train",
            *QUICK,
            "--steps",
            "100000",
            "--ckpt-dir",
            str(ckpt),
            "--metrics-file",
            str(metrics),
        ],
        metrics,
        sig,
    )
    assert exit_code == code, err
    assert "Traceback" not in err and "checkpoint saved" in err
    (summary,) = records(metrics, "summary")
    assert summary["status"] == "interrupted"
    saved = checkpoint.load(checkpoint.list_steps(ckpt)[-1][1])
    assert saved.step == summary["step"] == saved.state["data_position"]["step"]


@pytest.mark.integration
def test_a_signal_without_a_checkpoint_dir_exits_stopped_unsaved(tmp_path: Path) -> None:
    """Not 143: that code promises a checkpoint to resume from (a scheduler requeues on it)."""
    metrics = tmp_path / "m.jsonl"
    argv = ["-m", "trainer", "train", *QUICK, "--steps", "100000", "--metrics-file", str(metrics)]
    exit_code, err = signal_once_logging(argv, metrics, signal.SIGTERM)
    assert exit_code == EXIT_STOPPED_UNSAVED, err
    assert "nothing saved (no --ckpt-dir)" in err and "--resume" not in err, err
    (summary,) = records(metrics, "summary")
    assert summary["status"] == "interrupted" and summary["checkpoint"] is None
