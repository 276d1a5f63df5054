"""How many blocking device-to-host reads each training step makes (issue 35, "honest
throughput"), and that deferring them keeps the numerical stops' guarantees.

The reads are counted on a CPU run by benchmarks/host_reads.py (each `.item()`, `.tolist()`,
`.cpu()`, `float(t)`, ... and `torch.cuda.synchronize`, attributed to the step in flight). The
loop reads each step's loss and grad norm at the next log, checkpoint or eval step
(trainer/step_values.py): a non-log step reads nothing, except torch's GradScaler under fp16
(its found-inf flag, read on the host to decide whether optimizer.step runs: docs/trainer.md,
"Numerical health"). On a GPU `torch.cuda.set_sync_debug_mode("warn")` shows the same from
torch's side.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from tests.trainer.trainer_helpers import QUICK, REPO, RunCli, records
from trainer import checkpoint
from trainer.errors import EXIT_NUMERICAL, EXIT_SIGTERM

pytestmark = pytest.mark.integration  # it trains

GRAD_SCALER = "grad_scaler.py"  # fp16: torch's own per-step read (GradScaler._maybe_opt_step)


def _host_reads() -> Any:
    """benchmarks/host_reads.py, the counter trainer_overhead.py prints with."""
    path = REPO / "benchmarks" / "host_reads.py"
    spec = importlib.util.spec_from_file_location("host_reads", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("preset", "per_non_log_step"), [("bf16", []), ("fp16", [GRAD_SCALER])])
def test_a_non_log_step_reads_nothing_back(
    run_cli: RunCli, preset: str, per_non_log_step: list[str]
) -> None:
    with _host_reads().counting() as per_step:
        res = run_cli(
            "train", "--model", "tiny", "--preset", preset, "--steps", "8", "--log-interval",
            "4", "--eval-interval", "0", "--seq-len", "32", "--batch-size", "2",
        )  # fmt: skip
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


def test_a_stop_between_log_steps_reads_before_it_saves(
    run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM in step 3 of a 4-step log interval: the checkpoint of step 3 holds all three
    steps' values (read before the save), and the summary ends at step 3."""
    from trainer import train_step

    real_agree, calls = train_step.agree_stop, {"n": 0}

    def agree(run: object, stop: object) -> float:
        calls["n"] += 1
        if calls["n"] == 3:
            stop.signum = 15  # type: ignore[attr-defined]
        return real_agree(run, stop)  # type: ignore[arg-type]

    monkeypatch.setattr(train_step, "agree_stop", agree)
    ckpt, metrics = tmp_path / "ck", tmp_path / "m.jsonl"
    res = run_cli(
        "train", *QUICK, "--preset", "bf16", "--steps", "12", "--log-interval", "4",
        "--ckpt-dir", str(ckpt), "--metrics-file", str(metrics),
    )  # fmt: skip
    assert res.code == EXIT_SIGTERM, res.err
    assert [s for s, _ in checkpoint.list_steps(ckpt)] == [3]
    state = checkpoint.load(ckpt / "step_00000003").state
    assert len(state["grad_norms"]) == 3 and len(state["health"]["history"]) == 3
    (summary,) = records(metrics, "summary")
    assert (summary["status"], summary["step"]) == ("interrupted", 3)
    assert records(metrics) == []  # no log step was reached
