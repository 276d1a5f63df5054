"""SIGTERM under a real launcher (torchrun x2, gloo) ends 143 cleanly; after the run it is 0."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.trainer.trainer_helpers import (
    QUICK,
    records,
    run_python,
    signal_once_logging,
)
from trainer import checkpoint
from trainer.errors import EXIT_SIGTERM

# every test here runs the trainer as a process and signals it
pytestmark = pytest.mark.integration


@pytest.mark.slow
def test_sigterm_under_the_launcher_checkpoints_and_exits_143(tmp_path: Path) -> None:
    ckpt, metrics = tmp_path / "ck", tmp_path / "m.jsonl"
    code, err = signal_once_logging(
        [
            "-m",
            "trainer.launch",
            "--standalone",
            "--nproc_per_node",
            "2",
            "-m",
            "trainer",
            "train",
            *QUICK,
            "--preset",
            "bf16",
            "--steps",
            "100000",
            "--ckpt-dir",
            str(ckpt),
            "--metrics-file",
            str(metrics),
        ],
        metrics,
        signal.SIGTERM,  # what `podman stop` sends to PID 1
        wait_s=120,
    )
    assert code == EXIT_SIGTERM, err[-3000:]
    assert "Traceback" not in err and err.count("checkpoint saved in") == 2
    assert err.strip().splitlines()[-1].startswith("stopped: signal 15")
    (summary,) = records(metrics, "summary")
    assert summary["status"] == "interrupted" and summary["world_size"] == 2
    saved = checkpoint.load(checkpoint.list_steps(ckpt)[-1][1])
    assert saved.step == summary["step"]


def test_sigterm_after_the_run_completed_is_exit_0(tmp_path: Path) -> None:
    """The entry point keeps the handler until exit: a late `podman stop` (the run finished,
    the process is tearing down) must not turn exit 0 into 143."""
    code = (
        "import os, signal, sys\n"
        "from trainer.cli import main\n"
        f"code = main(['train', *{QUICK!r}, '--preset', 'bf16', '--steps', '2'], "
        "restore_signals=False)\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "sys.exit(code)\n"
    )
    proc = run_python("-c", code)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "done: completed at step 2" in proc.stdout
