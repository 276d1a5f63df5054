"""`trainimg run` overhead: the same short trainer run through `trainimg run` (planning,
inspect, host facts, podman-py create/start/stream/wait/remove) and through the pasted
`podman run` line it prints (`--dry-run`), alternating, on the test store's podman service.

    CONTAINER_HOST=unix://$PWD/.cache/test/podman/run/podman.sock \\
        .venv/bin/python benchmarks/run_overhead.py [--image REF] [--rounds 3]

Prints the wall time of each side per round and the median difference. Needs the CPU image
in that store (the engine tests build it).
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

from builder.engines.local_podman import LocalPodman

REPO = Path(__file__).resolve().parent.parent
IMAGE = "localhost/trainimg:debian12-cpu-py3.11-torch2.13.0-runtime"
ARGS = ["--", "info", "--json"]


def _timed(cmd: list[str], env: dict[str, str] | None = None) -> float:
    start = time.monotonic()
    subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=REPO)
    return time.monotonic() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", default=IMAGE)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    cli = [sys.executable, "-m", "builder.cli", "run", args.image]
    line = subprocess.run(
        [*cli, "--dry-run", *ARGS], check=True, capture_output=True, text=True, cwd=REPO
    ).stdout
    pasted = shlex.split(line)
    local = LocalPodman(REPO / ".cache" / "test" / "podman")
    local.configure()
    env = {**os.environ, **local.env()}
    rows = []
    for i in range(args.rounds):
        sides = [("trainimg run", [*cli, *ARGS], None), ("podman run", pasted, env)]
        if i % 2:
            sides.reverse()
        times = {name: _timed(cmd, e) for name, cmd, e in sides}
        rows.append((times["trainimg run"], times["podman run"]))
    print(f"{'round':>5} {'trainimg run s':>15} {'podman run s':>13} {'overhead s':>11}")
    for i, (a, b) in enumerate(rows, 1):
        print(f"{i:>5} {a:>15.2f} {b:>13.2f} {a - b:>+11.2f}")
    print(f"median overhead {statistics.median(a - b for a, b in rows):+.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
