"""DDP and FSDP2 under the one launcher (`python -m trainer.launch`, torchrun's arguments), two
gloo processes on the CPU, against one process; the trainer's exit codes survive it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.trainer.trainer_helpers import QUICK, REPO, RunCli, losses, records, subprocess_env
from trainer.errors import EXIT_BAD_INPUT, EXIT_NUMERICAL

# Two processes each take half of the global batch: the mean gradient is the same, only the
# reduction order (and, under FP8, the per-process amax) differs. Observed: 3e-4 (bf16) and
# 2e-3 (fp8-fwd) after 6 steps.
BF16_TOL = 2e-3
FP8_TOL = 1e-2


def torchrun(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer.launch",
            "--standalone",
            "--nproc_per_node",
            "2",
            "-m",
            "trainer",
            *argv,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=subprocess_env(),
        cwd=REPO,
        check=False,
    )


def _close(a: dict[int, float], b: dict[int, float], tol: float) -> None:
    assert a.keys() == b.keys() and a
    worst = max(abs(a[s] - b[s]) for s in a)
    assert worst <= tol, (worst, a, b)


# every test here trains under torch.distributed
pytestmark = pytest.mark.integration


def test_ddp_and_fsdp2_agree_with_one_process(run_cli: RunCli, tmp_path: Path) -> None:
    common = ("train", *QUICK, "--preset", "bf16", "--steps", "6", "--batch-size", "8")
    single = tmp_path / "single.jsonl"
    assert run_cli(*common, "--metrics-file", str(single)).code == 0
    ddp, fsdp = tmp_path / "ddp.jsonl", tmp_path / "fsdp.jsonl"
    # DDP with an fp32 all-reduce of the bf16 gradients (the comm hook path).
    proc = torchrun(*common, "--parallel", "ddp", "--grad-sync", "fp32", "--metrics-file", str(ddp))
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = torchrun(*common, "--parallel", "fsdp", "--metrics-file", str(fsdp))
    assert proc.returncode == 0, proc.stderr[-3000:]
    _close(losses(single), losses(ddp), BF16_TOL)
    _close(losses(single), losses(fsdp), BF16_TOL)
    (summary,) = records(fsdp, "summary")
    assert summary["world_size"] == 2 and summary["status"] == "completed"
    assert records(fsdp)[-1]["tokens_per_s_total"] == pytest.approx(
        2 * records(fsdp)[-1]["tokens_per_s"]
    )


def test_fsdp2_fp8_checkpoint_resumes_in_one_process(run_cli: RunCli, tmp_path: Path) -> None:
    """FP8 + selective recompute under FSDP2; its full checkpoint continues on one process."""
    common = (
        "train",
        *QUICK,
        "--preset",
        "fp8-fwd",
        "--steps",
        "6",
        "--activation-checkpointing",
        "selective",
    )
    single, mixed, ckpt = tmp_path / "single.jsonl", tmp_path / "mixed.jsonl", tmp_path / "ck"
    assert run_cli(*common, "--metrics-file", str(single)).code == 0
    proc = torchrun(
        *common,
        "--parallel",
        "fsdp",
        "--stop-at",
        "3",
        "--ckpt-dir",
        str(ckpt),
        "--metrics-file",
        str(mixed),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = run_cli(*common, "--ckpt-dir", str(ckpt), "--resume", "--metrics-file", str(mixed))
    assert res.code == 2 and "world_size 2 -> 1" in res.err
    res = run_cli(
        *common,
        "--ckpt-dir",
        str(ckpt),
        "--resume",
        "--resume-anyway",
        "--metrics-file",
        str(mixed),
    )
    assert res.code == 0, res.err
    _close(losses(single), losses(mixed), FP8_TOL)


@pytest.mark.slow
def test_fsdp2_float8_all_gather_trains_like_one_process(run_cli: RunCli, tmp_path: Path) -> None:
    """torchtitan's float8 all-gather (weights cast to FP8 before the all-gather, scales
    precomputed after each step) runs on gloo too; `fp8` (every GEMM FP8) only."""
    common = ("train", *QUICK, "--preset", "fp8", "--steps", "4")
    single, sharded = tmp_path / "single.jsonl", tmp_path / "sharded.jsonl"
    assert run_cli(*common, "--metrics-file", str(single)).code == 0
    proc = torchrun(*common, "--parallel", "fsdp", "--metrics-file", str(sharded))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "FSDP2 float8 all-gather" in proc.stdout
    _close(losses(single), losses(sharded), FP8_TOL)


def test_bad_input_and_a_numerical_stop_keep_their_codes_through_the_launcher() -> None:
    """torchrun alone turns both into 1 with a traceback; here 2 and 3, and the trainer's word."""
    bad = torchrun("train", *QUICK, "--preset", "bf16", "--lr", "nan")
    assert bad.returncode == EXIT_BAD_INPUT, bad.stderr[-3000:]
    assert "error: train.lr" in bad.stderr and "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines()[-1].startswith("trainer.launch: exit 2: bad input")
    nan = torchrun(
        "train", *QUICK, "--preset", "bf16", "--steps", "4", "--parallel", "fsdp",
        "--inject-fault", "nan@2",
    )  # fmt: skip
    assert nan.returncode == EXIT_NUMERICAL, nan.stderr[-3000:]
    assert nan.stderr.count("error: step 2: loss is nan") == 2 and "Traceback" not in nan.stderr
    assert nan.stderr.strip().splitlines()[-1].startswith("trainer.launch: exit 3: numerical")
