"""Helpers shared by the trainer tests (a uniquely named module: tests/ has other conftests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
# Short runs on the tiny model: no evaluation unless a test asks, every step logged.
QUICK = ("--model", "tiny", "--data", "synthetic", "--eval-interval", "0", "--log-interval", "1")


@dataclass
class Result:
    code: int
    out: str
    err: str


RunCli = Callable[..., Result]


def subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    return env


def run_python(
    *argv: str, timeout: float = 120, preexec_fn: Callable[[], None] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python ARGV` in a fresh process at the repo root (`preexec_fn`: e.g. resource limits)."""
    return subprocess.run(
        [sys.executable, *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=subprocess_env(),
        cwd=REPO,
        check=False,
        preexec_fn=preexec_fn,
    )


def run_module(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python -m trainer ARGV` in a fresh process."""
    return run_python("-m", "trainer", *argv, timeout=timeout)


def signal_once_logging(
    argv: list[str], metrics: Path, sig: int, wait_s: float = 60
) -> tuple[int, str]:
    """Start `python ARGV`, send `sig` once `metrics` has 3 records, wait for the exit: the exit
    code and stderr."""
    proc = subprocess.Popen(
        [sys.executable, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
        cwd=REPO,
    )
    try:
        deadline = time.monotonic() + wait_s
        while not (metrics.exists() and metrics.read_text().count("\n") >= 3):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err


def records(path: Path, event: str = "train", run: str | None = None) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if rec["event"] == event and (run is None or rec.get("run") == run):
            out.append(rec)
    return out


def losses(path: Path, run: str | None = None) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in records(path, "train", run)}
