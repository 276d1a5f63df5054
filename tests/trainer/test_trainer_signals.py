"""The stop path: signals under the one launcher (`python -m trainer.launch`, torchrun x2 on gloo)
end 143 with one complete checkpoint that every rank waited for, the workers get the whole grace
period (not torchrun's 30 s), and a signal after the run finished leaves exit 0."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.trainer.trainer_helpers import QUICK, REPO, records, subprocess_env
from trainer import checkpoint
from trainer.errors import (
    EXIT_BAD_INPUT,
    EXIT_NUMERICAL,
    EXIT_SIGINT,
    EXIT_SIGTERM,
    EXIT_STOPPED_UNSAVED,
)
from trainer.launch import exit_code_for

# Rank 0's first checkpoint write stalls this long: longer than torchrun's 30 s kill.
SLOW_WRITE_S = 35
SLOW_RANK0 = f"""\
# A stand-in for a checkpoint that takes long to write (a 1b model on a slow disk): rank 0's
# first fsync (inside the first checkpoint) sleeps {SLOW_WRITE_S} s. Workers only (RANK is set).
import os, time
if os.environ.get("RANK") == "0":
    _fsync = os.fsync
    def _slow(fd, _done=[]):
        if not _done:
            _done.append(1)
            time.sleep({SLOW_WRITE_S})
        return _fsync(fd)
    os.fsync = _slow
"""


STANDALONE = ("--standalone", "--nproc_per_node", "2")  # the launcher's own arguments


@contextlib.contextmanager
def _launched(
    *argv: str, launcher: Sequence[str] = STANDALONE, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    """`python -m trainer.launch LAUNCHER -m trainer train ARGV`, killed on the way out if it
    is still running (a failed assertion leaves no launcher behind)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainer.launch", *launcher, "-m", "trainer", "train", *argv],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env or subprocess_env(), cwd=REPO,
    )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _terminate(proc: subprocess.Popen[str], timeout: float) -> tuple[str, float]:
    """SIGTERM to the launcher: its stderr, and the seconds it took to exit."""
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=timeout)
    return err, time.monotonic() - sent


def _wait_for_records(proc: subprocess.Popen[str], metrics: Path, count: int) -> None:
    deadline = time.monotonic() + 120
    while not (metrics.exists() and metrics.read_text().count("\n") >= count):
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no training records in 120 s"
        time.sleep(0.1)


@pytest.mark.integration
@pytest.mark.slow
def test_sigterm_gives_the_workers_the_whole_grace_and_every_rank_waits(tmp_path: Path) -> None:
    """SIGTERM to the launcher (what `podman stop` sends to the container's PID 1) while rank
    0's checkpoint takes 35 s: plain torchrun SIGKILLs the workers after 30 s and the
    checkpoint is lost; here both ranks end 143 with the checkpoint complete."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SLOW_RANK0)
    env = subprocess_env()
    env["PYTHONPATH"] = f"{hook}{os.pathsep}{env['PYTHONPATH']}"
    ckpt, metrics = tmp_path / "ck", tmp_path / "m.jsonl"
    with _launched(
        *QUICK, "--preset", "bf16", "--steps", "100000", "--parallel", "fsdp",
        "--checkpoint-interval", "0", "--ckpt-dir", str(ckpt), "--metrics-file", str(metrics),
        env=env,
    ) as proc:  # fmt: skip
        _wait_for_records(proc, metrics, 3)
        err, took = _terminate(proc, 180)
    assert proc.returncode == EXIT_SIGTERM, err[-3000:]
    assert took >= SLOW_WRITE_S, took
    assert "Traceback" not in err and err.count("checkpoint saved in") == 2, err[-3000:]
    assert err.strip().splitlines()[-1].startswith("trainer.launch: exit 143: stopped by SIGTERM")
    (summary,) = records(metrics, "summary")
    assert summary["status"] == "interrupted" and summary["world_size"] == 2
    ((step, path),) = checkpoint.list_steps(ckpt)  # one checkpoint, and it is complete
    assert checkpoint.load(path).step == step == summary["step"]


@pytest.mark.integration
def test_a_signal_while_the_launcher_starts_ends_it_at_once() -> None:
    """As a container's pid 1 the launcher would ignore SIGTERM until torchrun's handler exists
    (the kernel drops what pid 1 does not handle); it handles it from its first line instead."""
    with _launched(*QUICK, "--steps", "100000") as proc:
        time.sleep(0.5)  # importing torch
        err, _ = _terminate(proc, 60)
    assert proc.returncode == EXIT_STOPPED_UNSAVED, err[-3000:]
    # before torchrun started its workers, or before they could catch it: nothing to save
    assert "before the workers" in err and "nothing" in err and "Traceback" not in err


@pytest.mark.integration
def test_a_signal_while_the_launcher_waits_in_the_rendezvous_ends_it_in_seconds() -> None:
    """Node 1 of a two-node job whose rendezvous host (node 0) accepts the connection and never
    answers, as a stopped node 0 leaves it: the launcher waits in torch's C++ store client,
    which defers Python's signal handlers until its timeout (a job stopped while it started
    used to run past Slurm's grace, seen in CI). The watchdog ends it: exit 4 in seconds."""
    with socket.socket() as host:
        host.bind(("127.0.0.1", 0))
        host.listen(8)
        host.settimeout(120)
        node1 = (
            "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"127.0.0.1:{host.getsockname()[1]}", "--rdzv-id", "t",
            "--rdzv-conf", "is_host=false",
        )  # fmt: skip
        with _launched(*QUICK, "--steps", "3", launcher=node1) as proc:
            conn, _ = host.accept()  # the launcher is in the store client now
            with conn:
                time.sleep(1)
                err, took = _terminate(proc, 60)  # torch's own timeout is 60 s to 10 min
    assert proc.returncode == EXIT_STOPPED_UNSAVED, err[-3000:]
    assert "blocked in torch's rendezvous" in err and "nothing was saved" in err, err[-3000:]
    assert took < 30, took  # the watchdog's 5 s patience, then exit


@pytest.mark.integration
def test_a_signal_right_after_the_run_finished_leaves_exit_0(tmp_path: Path) -> None:
    """`python -m trainer` leaves with os._exit: no interpreter finalization, whose reset of
    the signal handlers let a late SIGTERM (0.5-1 s after `done:`) kill a finished run."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainer", "train", *QUICK, "--preset", "bf16", "--steps", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env(),
        cwd=REPO,
    )  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("done:"):
            break
    while proc.poll() is None:  # a stream of late `podman stop`s until the process is gone
        proc.send_signal(signal.SIGTERM)  # a no-op once it has exited
        time.sleep(0.005)
    proc.wait(timeout=60)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""


@pytest.mark.parametrize(
    ("codes", "received", "expected"),
    [
        ([143, 143], None, EXIT_SIGTERM),  # node 1's workers stop because node 0 was stopped
        # a worker killed before the trainer's handler existed saved nothing, and a collective
        # checkpoint without it cannot be whole: not "resume me"
        ([143, -15], signal.SIGTERM, EXIT_STOPPED_UNSAVED),
        ([-15], signal.SIGTERM, EXIT_STOPPED_UNSAVED),
        ([-2, 130], signal.SIGINT, EXIT_STOPPED_UNSAVED),
        ([4, 143], None, EXIT_STOPPED_UNSAVED),  # a rank without --ckpt-dir
        ([130, 130], signal.SIGINT, EXIT_SIGINT),
        ([2, 4], None, EXIT_BAD_INPUT),
        ([2, -15], None, EXIT_BAD_INPUT),  # torchrun stopped the other rank
        ([3, -9], None, EXIT_NUMERICAL),
        ([2, 143], None, EXIT_BAD_INPUT),  # bad input is not "resume me"
        ([3, 2, 143], None, EXIT_NUMERICAL),
        ([1, 143], None, None),  # a crash keeps torchrun's report
        ([-6], None, None),  # SIGABRT: nobody sent it
        ([-15], None, None),  # SIGTERM the launcher did not pass on
        ([], None, None),
    ],
)
def test_the_launcher_exit_code(codes: list[int], received: int | None, expected: int) -> None:
    assert exit_code_for(codes, received) == expected


def test_torchrun_still_looks_its_signal_handler_up_when_it_starts_the_workers() -> None:
    """The launcher replaces torchrun's handler by its module name (trainer/launch.py
    Forwarder); a torch that installed it some other way would silently bring back the 30 s
    kill. This fails first on such a torch."""
    import inspect

    from torch.distributed.elastic.multiprocessing import api

    assert callable(api._terminate_process_handler)
    assert "_terminate_process_handler" in inspect.getsource(api.PContext.start)
