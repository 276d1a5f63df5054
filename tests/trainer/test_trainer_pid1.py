"""The trainer as a container's PID 1 (trainer/pid1.py), rehearsed in a PID namespace of its own
(`unshare --pid --fork`, as root): orphans are reaped, signals reach the trainer, and the
trainer's exit code is the container's."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.trainer.trainer_helpers import QUICK, REPO, subprocess_env
from trainer import checkpoint

pytestmark = pytest.mark.integration

# Makes an orphan that exits (the kernel hands it to PID 1), then reports how many zombies
# PID 1 left: exit 5 when none, 6 when one stayed unreaped.
ORPHAN = """
import os, pathlib, time
middle = os.fork()
if middle == 0:
    if os.fork() == 0:
        time.sleep(0.3)
        os._exit(0)
    os._exit(0)
os.waitpid(middle, 0)
time.sleep(1.5)
zombies = [p for p in pathlib.Path("/proc").glob("[0-9]*")
           if (p / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"]
os._exit(6 if zombies else 5)
"""


def _as_pid1(*argv: str) -> list[str]:
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.fail("unshare (util-linux) is missing: scripts/setup.sh installs it")
    return [unshare, "--pid", "--fork", "--mount-proc", "--kill-child", *argv]


def _run(code: str) -> int:
    proc = subprocess.run(
        _as_pid1(sys.executable, "-c", code),
        env=subprocess_env(),
        cwd=REPO,
        timeout=60,
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.returncode


def test_as_pid1_the_trainers_init_reaps_orphans_and_keeps_the_exit_code() -> None:
    bare = _run(ORPHAN)
    assert bare == 6, "a plain Python as PID 1 leaves the orphan a zombie (the defect)"
    wrapped = _run(
        "from trainer.pid1 import main_as_init_when_pid1\n"
        f"main_as_init_when_pid1(lambda: exec({ORPHAN!r}))"
    )
    assert wrapped == 5


def _ns_init(unshare_pid: int) -> int:
    """The host pid of the namespace's PID 1: unshare's only child."""
    children = Path(f"/proc/{unshare_pid}/task/{unshare_pid}/children")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pids = children.read_text().split()
        if pids:
            return int(pids[0])
        time.sleep(0.05)
    pytest.fail("unshare started no PID 1")


def test_sigterm_to_the_trainer_as_pid1_checkpoints_and_exits_143(tmp_path: Path) -> None:
    ckpt, metrics = tmp_path / "ck", tmp_path / "m.jsonl"
    argv = _as_pid1(
        sys.executable, "-m", "trainer", "train", *QUICK, "--steps", "100000",
        "--checkpoint-interval", "0", "--ckpt-dir", str(ckpt), "--metrics-file", str(metrics),
    )  # fmt: skip
    proc = subprocess.Popen(argv, env=subprocess_env(), cwd=REPO, stdout=subprocess.DEVNULL)
    try:
        init = _ns_init(proc.pid)
        deadline = time.monotonic() + 120
        while not (metrics.exists() and '"event": "train"' in metrics.read_text()):
            assert proc.poll() is None and time.monotonic() < deadline, "no step was logged"
            time.sleep(0.2)
        # Only a handler makes PID 1 take a signal from outside its namespace: the init has one
        # and passes it on to the trainer.
        os.kill(init, signal.SIGTERM)
        assert proc.wait(timeout=120) == 128 + signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
    ((_, path),) = checkpoint.list_steps(ckpt)
    assert path.is_dir()
