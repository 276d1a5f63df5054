"""How many blocking device-to-host reads each training step makes (issue 35, "honest
throughput"), and that deferring them keeps the numerical stops' guarantees.

On a GPU every `.item()`, `.tolist()`, `.cpu()`, `float(t)`, `int(t)` or `bool(t)` of a device
tensor, and every `torch.cuda.synchronize`, waits for the queue to drain; on the CPU they cost
nothing, so this counts the calls themselves (torch's Python-level ones included) on a CPU run,
attributed to the step in flight. The loop reads each step's loss and grad norm at the next log,
checkpoint or eval step (trainer/step_values.py): a non-log step reads nothing, except torch's
GradScaler under fp16 (its found-inf flag, read on the host to decide whether optimizer.step
runs: docs/trainer.md, "Numerical health"). On a GPU `torch.cuda.set_sync_debug_mode("warn")`
shows the same from torch's side.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.trainer.trainer_helpers import QUICK, RunCli, records
from trainer import checkpoint, train_step
from trainer.errors import EXIT_NUMERICAL

pytestmark = pytest.mark.integration  # it trains

READS = ("item", "tolist", "cpu", "__float__", "__int__", "__bool__")
# reads of tensors that live on the host on every device, so no sync: the optimizer's step
# counter (a CPU tensor, as torch's own AdamW keeps it when not capturable)
HOST_SIDE = {("optim.py", "_update")}
GRAD_SCALER = "grad_scaler.py"  # fp16: torch's own per-step read (GradScaler._maybe_opt_step)

Reads = dict[int, list[tuple[str, str]]]


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> Reads:
    """Where each step read (file, function): the step is the one train_step.backward was last
    called for."""
    per_step: Reads = defaultdict(list)
    current = [0]
    real_backward = train_step.backward

    def backward(run: Any, params: Any, step: int, lr: float, arm: bool) -> Any:
        current[0] = step
        return real_backward(run, params, step, lr, arm)

    def note() -> None:
        caller = sys._getframe(2).f_code
        where = (caller.co_filename.rsplit("/", 1)[-1], caller.co_name)
        if current[0] and where not in HOST_SIDE:
            per_step[current[0]].append(where)

    monkeypatch.setattr(train_step, "backward", backward)
    for name in READS:
        real: Callable[..., Any] = getattr(torch.Tensor, name)

        def counted(self: torch.Tensor, *a: Any, _real: Callable[..., Any] = real) -> Any:
            note()
            return _real(self, *a)

        monkeypatch.setattr(torch.Tensor, name, counted)
    # no GPU here: a call would fail on this torch, so it is only counted
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: note())
    return per_step


@pytest.mark.parametrize(("preset", "per_non_log_step"), [("bf16", []), ("fp16", [GRAD_SCALER])])
def test_a_non_log_step_reads_nothing_back(
    run_cli: RunCli, monkeypatch: pytest.MonkeyPatch, preset: str, per_non_log_step: list[str]
) -> None:
    per_step = _count_reads(monkeypatch)
    res = run_cli(
        "train", "--model", "tiny", "--preset", preset, "--steps", "8", "--log-interval", "4",
        "--eval-interval", "0", "--seq-len", "32", "--batch-size", "2",
    )  # fmt: skip
    monkeypatch.undo()
    assert res.code == 0, res.err
    non_log = {s: per_step[s] for s in range(1, 9) if s not in (4, 8)}
    files = {s: [file for file, _ in reads] for s, reads in non_log.items()}
    assert all(read == per_non_log_step for read in files.values()), dict(per_step)
    # a log step reads the steps' values in one transfer (step_values.py), plus what it logs
    for log_step in (4, 8):
        assert ("step_values.py", "read") in per_step[log_step], dict(per_step)


def _stopped(run_cli: RunCli, tmp_path: Path, log_every: int, *extra: str) -> dict[str, Any]:
    """A run that must stop numerically: its error line, checkpoints and records."""
    ckpt, metrics = tmp_path / f"ck{log_every}", tmp_path / f"m{log_every}.jsonl"
    res = run_cli(
        "train", *QUICK, "--preset", "bf16", "--steps", "12", "--checkpoint-interval", "3",
        "--log-interval", str(log_every), "--ckpt-dir", str(ckpt), "--metrics-file", str(metrics),
        *extra,
    )  # fmt: skip
    assert res.code == EXIT_NUMERICAL and "Traceback" not in res.err, res.err
    (summary,) = records(metrics, "summary")
    return {
        "error": res.err.strip().splitlines()[-1],
        "checkpoints": [s for s, _ in checkpoint.list_steps(ckpt)],
        "summary": {k: summary[k] for k in ("status", "step", "final_loss", "tokens")},
    }


# a NaN at step 5, first read at step 6: a checkpoint step, which must read before it saves
# (else it would refuse the NaN weights, as "step 6")
NAN_AT_5 = ("--inject-fault", "nan@5")
# at this lr the loss rises 1.2 % at step 5 (4.4762 -> 4.5306): more than 1 % over the last
# loss, a spike, read at step 6
SPIKE_AT_5 = ("--lr", "0.05", "--set", "health.spike_window=1", "--set",
              "health.spike_factor=1.01", "--spike-action", "stop")  # fmt: skip


@pytest.mark.parametrize("fault", [NAN_AT_5, SPIKE_AT_5], ids=["nan", "spike"])
def test_a_deferred_read_stops_where_a_per_step_read_would(
    run_cli: RunCli, tmp_path: Path, fault: tuple[str, ...]
) -> None:
    """Read every step (log interval 1) or every 4: the same step named, the same checkpoints
    kept (none after the fault), the same summary."""
    every_step = _stopped(run_cli, tmp_path, 1, *fault)
    deferred = _stopped(run_cli, tmp_path, 4, *fault)
    assert deferred == every_step
    assert every_step["summary"]["status"] == "numerical_stop"
    assert every_step["checkpoints"] == [3]
    if fault == NAN_AT_5:
        assert every_step["error"].startswith("error: step 5: loss is nan")
        assert every_step["summary"]["step"] == 4
    else:
        assert every_step["error"].startswith("error: step 5: loss 4.5306 is 1.0x")
        assert every_step["summary"]["step"] == 5
