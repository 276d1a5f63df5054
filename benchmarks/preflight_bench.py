"""Preflight speed: this machine end to end (target <= 2 s), and a 100-host recorded fleet
judged offline with `--from` (target <= 3 s, issue 21), through the real CLI in a fresh process
and in this one; the in-process rows also give CPU seconds (user+sys), which the other sessions
sharing a machine change least. Then a 1,000-host fleet in a fresh process, JSON Lines and the
text report: its CPU seconds (target <= 12) and peak memory (target <= 150 MB, issue 29).

The fleet is the test fixtures (tests/preflight/fixtures: recorded hosts) copied round-robin
into 100 record directories, judged with the matrix's images and a target driver.
Prints a table; it asserts nothing (speed targets live here, not in timed tests).
Run: .venv/bin/python benchmarks/preflight_bench.py
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "preflight" / "fixtures"
RUNS = 3
Row = tuple[str, str, float, float, str]


def timed(args: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "builder.cli", "preflight", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    return time.perf_counter() - start, proc.returncode


def in_process(args: list[str]) -> tuple[float, int]:
    """The same command inside this process (imports already paid): preflight's own time."""
    import contextlib
    import io

    from builder.cli import main as cli

    start = time.perf_counter()
    cpu = time.process_time()
    with contextlib.redirect_stdout(io.StringIO()):
        code = cli(["preflight", *args])
    CPU[tuple(args)] = [*CPU.get(tuple(args), []), time.process_time() - cpu]
    return time.perf_counter() - start, code


CPU: dict[tuple[str, ...], list[float]] = {}


def fresh(args: list[str]) -> tuple[float, float, float, int]:
    """The CLI in a fresh process: wall s, CPU s (user+sys) and peak RSS in MB, its exit."""
    import os

    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "builder.cli", "preflight", *args],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode


def fleet(root: Path, n: int) -> None:
    hosts = sorted(p for p in FIXTURES.iterdir() if (p / "fixture.yaml").is_file())
    for i in range(n):
        shutil.copytree(hosts[i % len(hosts)], root / f"host{i:03d}")


def measure(case: str, hosts: str, args: list[str], target: float) -> list[Row]:
    """The CLI in a fresh process, then in this one (imports paid): median of RUNS each."""
    rows = []
    for how, run in (("CLI process", timed), ("in process", in_process)):
        runs = [run(args) for _ in range(RUNS)]
        secs = statistics.median(t for t, _ in runs)
        cpu = CPU.get(tuple(args))
        note = f"exit {runs[0][1]}" + (f", CPU {statistics.median(cpu):.2f} s" if cpu else "")
        rows.append((f"{case}, {how}", hosts, secs, target, note))
    return rows


def main() -> None:
    sys.path.insert(0, str(REPO))
    rows = measure("this machine (local://, matrix images)", "1 host", ["--json"], 2.0)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "fleet"
        root.mkdir()
        fleet(root, 100)
        args = ["--from", str(root), "--target-driver", "580.65.06", "--jobs", "8", "--json"]
        rows += measure("recorded fleet (--from, --target-driver)", "100 hosts", args, 3.0)
        text = ["--from", str(root), "--target-driver", "580.65.06", "--jobs", "8"]
        rows += measure("recorded fleet, the text report", "100 hosts", text, 3.0)
        big = root.parent / "fleet-1000"
        big.mkdir()
        fleet(big, 1000)
        thousand = ["--from", str(big), "--target-driver", "580.65.06", "--jobs", "8"]
        large = [(shape, fresh([*thousand, *flags])) for shape, flags in
                 (("JSON Lines (--jsonl)", ["--jsonl"]), ("the text report", []))]  # fmt: skip
    print(f"{'case':<58} {'hosts':>9} {'median s':>9} {'target s':>9} {'ok':>4}  result")
    for case, hosts, secs, target, result in rows:
        ok = "yes" if secs <= target else "NO"
        print(f"{case:<58} {hosts:>9} {secs:>9.2f} {target:>9.1f} {ok:>4}  {result}")
    print()
    print(f"{'1,000 recorded hosts, a fresh process':<40} {'wall s':>7} {'CPU s':>6} "
          f"{'peak MB':>8} {'ok':>4}  exit")  # fmt: skip
    for shape, (wall, cpu, peak, code) in large:
        ok = "yes" if cpu <= 12 and peak <= 150 else "NO"
        print(f"{shape:<40} {wall:>7.2f} {cpu:>6.2f} {peak:>8.1f} {ok:>4}  {code}")
    print("(targets: CPU <= 12 s, peak RSS <= 150 MB; one run each)")
    print(
        f"(median of {RUNS} runs each; CLI process = wall clock of a fresh `python -m "
        "builder.cli preflight`, interpreter start-up and every command's imports included)"
    )


if __name__ == "__main__":
    main()
