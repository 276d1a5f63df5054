"""Start-up time of the `trainimg` CLI: the whole process, as a shell or a fleet script sees it.

    .venv/bin/python benchmarks/startup.py [--runs N]

Runs each command N times (default 7) through the venv's `trainimg` console script from the
checkout's root and prints the median, the fastest and the slowest wall time against the target
(<= 0.3 s median for `--help`, `matrix list`, `matrix explain`, `compat`). A bare interpreter and
`import builder.cli` are timed beside them as the floor. The machine is shared, so the load
average is printed with the table; it asserts nothing (timing targets live here, not in tests).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TRAINIMG = str(Path(sys.executable).parent / "trainimg")
TARGET_S = 0.3
CPU_CELL = "debian12-cpu-py3.11-torch2.13.0-runtime"
GPU_CELL = "rocky9-cu128-py3.12-torch2.9.1-runtime"

# (what, argv, exit codes that mean it worked, held to TARGET_S)
COMMANDS: tuple[tuple[str, list[str], tuple[int, ...], bool], ...] = (
    ("python -c pass", [sys.executable, "-c", "pass"], (0,), False),
    ("import builder.cli", [sys.executable, "-c", "import builder.cli"], (0,), False),
    ("trainimg --help", [TRAINIMG, "--help"], (0,), True),
    ("trainimg matrix list", [TRAINIMG, "matrix", "list"], (0,), True),
    ("trainimg matrix explain", [TRAINIMG, "matrix", "explain", CPU_CELL], (0,), True),
    # 0 runs, 3 runs with caveats, 1 broken: all are answers
    (
        "trainimg compat",
        [TRAINIMG, "compat", GPU_CELL, "--driver", "580.65.06", "--gpu", "h100"],
        (0, 1, 3),
        True,
    ),
)


def wall(argv: list[str], ok: tuple[int, ...]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    if proc.returncode not in ok:
        sys.exit(f"startup: {' '.join(argv)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs per command (default 7)")
    runs = parser.parse_args().runs
    if runs < 5:
        parser.error("--runs: at least 5, for a median that means something")
    for _what, argv, ok, _held in COMMANDS:
        wall(argv, ok)  # warm the page cache and the .pyc files once
    load = os.getloadavg()[0]
    print(f"trainimg start-up, {runs} runs each, load average {load:.1f} on {os.cpu_count()} CPUs")
    print(f"{'command':<26}{'median':>9}{'fastest':>9}{'slowest':>9}  target")
    for what, argv, ok, held in COMMANDS:
        times = [wall(argv, ok) for _ in range(runs)]
        median = statistics.median(times)
        target = f"<= {TARGET_S} s {'ok' if median <= TARGET_S else 'OVER'}" if held else "(floor)"
        print(f"{what:<26}{median:>8.3f}s{min(times):>8.3f}s{max(times):>8.3f}s  {target}")


if __name__ == "__main__":
    main()
