"""Helpers shared by the trainer tests (a uniquely named module: tests/ has other conftests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


def run_module(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python -m trainer ARGV` in a fresh process."""
    return subprocess.run(
        [sys.executable, "-m", "trainer", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=subprocess_env(),
        cwd=REPO,
        check=False,
    )


def records(path: Path, event: str = "train", run: str | None = None) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if rec["event"] == event and (run is None or rec.get("run") == run):
            out.append(rec)
    return out


def losses(path: Path, run: str | None = None) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in records(path, "train", run)}
