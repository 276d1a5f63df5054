"""Start-up time of the `trainimg` CLI: the whole process, as a shell or a fleet script sees it.

    .venv/bin/python benchmarks/startup.py [--runs N] [--tree DIR]

Runs each command N times (default 7) through the venv's `trainimg` console script from the
checkout's root and prints the median wall and CPU time against the target (<= 0.3 s median for
`--help`, `matrix list`, `matrix explain`, `compat`), twice: as Python normally runs (compiled
modules cached; here in a temporary PYTHONPYCACHEPREFIX, so the checkout stays clean) and with
PYTHONDONTWRITEBYTECODE=1 (every module compiled at every start, as on a machine that sets it).
A bare interpreter and `import builder.cli` are timed beside them as the floor. The machine is
shared, so the load average is printed with the table; it asserts nothing (timing targets live
here, not in tests). --tree DIR times another checkout's code with this venv (PYTHONPATH=DIR,
from DIR): `git worktree add /tmp/main main` gives the numbers before a change.

Measured for issue 27 (matrix.yaml through libyaml, `matrix list` without the rules), 20 runs,
load 5.2-5.3 on 2 shared CPUs; medians, .pyc cached / PYTHONDONTWRITEBYTECODE=1. Wall time
swings with the load; CPU (user+sys) is the number to compare:

    command                 before: wall    cpu  | no .pyc cpu   after: wall    cpu  | no .pyc cpu
    python -c pass                  0.054  0.045 |  0.059               0.065  0.051 |  0.052
    trainimg matrix list            0.467  0.360 |  0.397               0.542  0.261 |  0.299
    trainimg matrix explain         0.413  0.321 |  0.413               0.470  0.337 |  0.306
    trainimg compat                 0.597  0.390 |  0.438               0.345  0.318 |  0.364
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
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


def wall(argv: list[str], ok: tuple[int, ...], env: dict[str, str]) -> tuple[float, float]:
    """One run's wall and CPU seconds (user+sys: what other work on the machine changes least)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    cwd = env.get("PYTHONPATH", REPO)
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in ok:
        sys.exit(f"startup: {' '.join(argv)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return took, cpu


def medians(runs: int, env: dict[str, str]) -> list[tuple[float, float]]:
    """Per command: the median wall and the median CPU seconds of `runs` runs."""
    for _what, argv, ok, _held in COMMANDS:
        wall(argv, ok, env)  # warm the page cache (and write the bytecode cache) once
    out = []
    for _, argv, ok, _ in COMMANDS:
        times = [wall(argv, ok, env) for _ in range(runs)]
        out.append((statistics.median(t[0] for t in times), statistics.median(t[1] for t in times)))
    return out


def verdict(median: float, held: bool) -> str:
    if not held:
        return "(floor)"
    return f"{'ok' if median <= TARGET_S else 'OVER'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs per command (default 7)")
    parser.add_argument("--tree", type=Path, help="time this checkout's code (default: this one)")
    args = parser.parse_args()
    runs = args.runs
    if runs < 5:
        parser.error("--runs: at least 5, for a median that means something")
    plain = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")
    }
    if args.tree is not None:
        if not (args.tree / "builder" / "cli.py").is_file():
            parser.error(f"--tree {args.tree}: not a trainimg checkout (no builder/cli.py)")
        plain["PYTHONPATH"] = str(args.tree.resolve())
    with tempfile.TemporaryDirectory(prefix="trainimg-pycache-") as pycache:
        cached = medians(runs, {**plain, "PYTHONPYCACHEPREFIX": pycache})
    uncached = medians(runs, {**plain, "PYTHONDONTWRITEBYTECODE": "1"})
    load = os.getloadavg()[0]
    cpus = os.cpu_count()
    tree = plain.get("PYTHONPATH", str(REPO))
    print(f"trainimg start-up ({tree}): median of {runs} runs, load {load:.1f} on {cpus} CPUs")
    print(
        f"{'command':<26}{'.pyc cached':>12}{'cpu':>8}{'no .pyc':>10}{'cpu':>8}"
        f"  target <= {TARGET_S} s wall"
    )
    for (what, _argv, _ok, held), (a, ac), (b, bc) in zip(COMMANDS, cached, uncached, strict=True):
        print(
            f"{what:<26}{a:>11.3f}s{ac:>7.3f}s{b:>9.3f}s{bc:>7.3f}s"
            f"  {verdict(a, held)} / {verdict(b, held)}"
        )


if __name__ == "__main__":
    main()
