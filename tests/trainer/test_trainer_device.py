"""The device rehearsal: the loop, the optimizer's unchanged-update count, the finiteness check,
checkpoint assembly and resume with every tensor on a device that is not the CPU, under ATen's
device rules (tests/trainer/device_rehearsal.py, in a process of its own). The first test proves
the rehearsal refuses what a CUDA kernel refuses and allows what it allows; a device mix in the
trainer (optim.py and train_state.py each stacked a CPU scalar with device tensors) fails here."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.trainer.trainer_helpers import QUICK, records, run_python
from trainer import checkpoint

# each test starts a process that trains or imports torch
pytestmark = pytest.mark.integration


def _rehearse(*argv: str) -> tuple[int, str, str]:
    proc = run_python("-m", "tests.trainer.device_rehearsal", *argv, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


def test_the_rehearsal_device_keeps_atens_device_rules() -> None:
    code, out, err = _rehearse("rules")
    assert code == 0, err[-2000:]
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["device"] == "rehearsal:0" and seen["sum"] == "6.0"
    assert seen["add a CPU scalar"] == "rehearsal:0"  # a CPU 0-dim scalar, as CUDA kernels allow
    # what optim.py:108 and train_state.py:59 did: refused, as on a GPU
    assert "not on the expected device" in seen["stack with a CPU scalar"]
    assert "not on the expected device" in seen["add a CPU vector"]
    assert "same device" in seen["index with a CPU index"]  # torchgen's check in the CUDA kernel
    assert seen["to the host"] == "cpu [1.0, 1.0, 1.0]"
    assert seen["tensor(device=)"] == "rehearsal:0"
    assert seen["autocast matmul"] == "torch.bfloat16"
    assert seen["numpy"].startswith("TypeError") and "numpy" in seen["numpy"]
    assert seen["grad"] == "rehearsal:0 [[3.0, 3.0], [3.0, 3.0]]"


def test_fp8_trains_checkpoints_and_resumes_on_a_device(tmp_path: Path) -> None:
    ckpt, metrics = tmp_path / "ck", tmp_path / "m.jsonl"
    common = (
        "train", *QUICK, "--device", "rehearsal", "--preset", "fp8", "--steps", "4",
        "--eval-interval", "2", "--checkpoint-interval", "2", "--ckpt-dir", str(ckpt),
        "--metrics-file", str(metrics),
    )  # fmt: skip
    code, out, err = _rehearse(*common, "--stop-at", "3")
    assert code == 0, err[-3000:]
    assert "rehearsal device" in out
    code, out, err = _rehearse(*common, "--resume")
    assert code == 0, err[-3000:]
    train = records(metrics)
    assert [r["step"] for r in train] == [1, 2, 3, 4]
    assert all(math.isfinite(r["loss"]) for r in train) and train[-1]["loss"] < train[0]["loss"]
    # the optimizer counted on the device; fp32 masters lose no update
    assert all(r["unchanged_frac"] is not None and r["unchanged_frac"] < 0.01 for r in train)
    assert all(r["fp8_input_amax_max"] and r["fp8_grad_amax_max"] for r in train)
    assert [s for s, _ in checkpoint.list_steps(ckpt)] == [2, 3, 4]
    state = checkpoint.load(ckpt / "step_00000004").state  # assembled on the host
    moments = [v for s in state["optimizer"]["state"].values() for v in s.values()]
    assert moments and all(t.device.type == "cpu" for t in [*state["model"].values(), *moments])


def test_fp16_loss_scaling_runs_on_a_device(tmp_path: Path) -> None:
    metrics = tmp_path / "m.jsonl"
    code, _, err = _rehearse(
        "train", *QUICK, "--device", "rehearsal", "--preset", "fp16", "--steps", "2",
        "--ckpt-dir", str(tmp_path / "ck"), "--metrics-file", str(metrics),
    )  # fmt: skip
    assert code == 0, err[-3000:]
    assert [r["loss_scale"] for r in records(metrics)] == [65536.0, 65536.0]
