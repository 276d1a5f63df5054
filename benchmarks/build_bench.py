"""Build benchmark: cold build, no-op rebuild, trainer-only rebuild and image size of the CPU cell.

    .venv/bin/python benchmarks/build_bench.py [--engine podman|docker|both] [--keep]

Runs `trainimg build` (the CLI, as a user would) against a FRESH isolated podman store under
.cache/bench/ (so "cold" is cold: only the offline base is imported first, from the cached
rootfs tarball), air-gapped from the wheelhouse. Prints a table with the issue's targets:
no-op rebuild <= 2 s, trainer-only rebuild <= 10% of cold, CPU image <= 1.2 GB. The store is
removed afterwards unless --keep. Uses the worktree's trainer/ when it exists, else a stand-in.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from builder.build.base_image import BaseSpec, make_offline_base
from builder.build.wheelhouse import fill
from builder.engines.local_podman import LocalPodman
from builder.engines.podman import PodmanEngine
from builder.workspace import open_workspace

REPO = Path(__file__).resolve().parent.parent
BASE_TAG = "localhost/trainimg-base:bookworm"


@dataclass
class Row:
    engine: str
    cold: float
    noop: float
    trainer_only: float
    size: int
    cached: str


def standin_trainer(directory: Path) -> Path:
    directory.mkdir(parents=True)
    (directory / "__init__.py").write_text('__version__ = "0.0.0+standin"\n')
    (directory / "__main__.py").write_text(
        "import argparse\nargparse.ArgumentParser(prog='trainer').parse_args()\n"
    )
    return directory


def trainimg(*args: str, env: dict[str, str]) -> tuple[float, str, str]:
    """Run the CLI; (wall seconds, stdout, stderr). Exits the benchmark on failure."""
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "builder.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=3600,
    )
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(
            f"trainimg {' '.join(args[:2])} failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
        )
    return seconds, proc.stdout, proc.stderr


def cached_steps(stderr: str) -> str:
    for line in stderr.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) > 6 and "/" in cells[6]:
            return cells[6]
    return "-"


def bench(
    kind: str, url: str, wheelhouse: Path, trainer: Path, work: Path, env: dict[str, str]
) -> Row:
    lock = work / f"lock-{kind}.json"
    common = [
        "build",
        "--engine",
        kind,
        "--url",
        url,
        "--wheelhouse",
        str(wheelhouse),
        "--repository",
        f"localhost/bench-{kind}",
        "--lock",
        str(lock),
        "--quiet",
    ]
    cold, out, _ = trainimg(*common, "--trainer", str(trainer), env=env)
    image = out.split()[0]
    noop, _, err = trainimg(*common, "--trainer", str(trainer), env=env)
    if "up to date" not in err:
        sys.exit(f"{kind}: the second build was not skipped:\n{err[-2000:]}")
    changed = work / f"trainer-{kind}" / "trainer"
    shutil.copytree(trainer, changed, ignore=shutil.ignore_patterns("__pycache__"))
    with (changed / "__main__.py").open("a") as fh:
        fh.write("\n# a trainer-only change for the benchmark\n")
    trainer_only, _, err = trainimg(*common, "--trainer", str(changed), env=env)
    size = int(
        json.loads(
            LocalPodman(Path(env["TRAINIMG_BENCH_ROOT"])).podman(
                "image", "inspect", "--format", "json", image
            )
        )[0]["Size"]
    )
    return Row(kind, cold, noop, trainer_only, size, cached_steps(err))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=("podman", "docker", "both"), default="both")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark's podman store")
    args = parser.parse_args()

    ws = open_workspace(REPO / "matrix.yaml")
    cell = ws.cell(ws.matrix.project.default_cell)
    cache = REPO / ".cache"
    wheelhouse = Path(os.environ.get("TRAINIMG_WHEELHOUSE") or cache / "wheelhouse")
    links = [Path("/opt/wheels")] if Path("/opt/wheels").is_dir() else []
    fill(wheelhouse, [cell], ws.matrix.project, find_links=links)
    # The rootfs tarball `trainimg base` (or the test session) cached, if any.
    base_cache = next(
        (d for d in (cache / "base", cache / "test" / "base") if any(d.glob("rootfs-*.tar"))),
        cache / "base",
    )

    work = Path(tempfile.mkdtemp(prefix="bench-", dir=cache))
    local = LocalPodman(work / "podman")
    env = {
        **os.environ,
        **local.configure(),
        "TRAINIMG_BENCH_ROOT": str(local.root),
        "COLUMNS": "200",
    }
    for var in ("TRAINIMG_PODMAN_ROOT", "CONTAINER_HOST", "DOCKER_HOST"):
        env.pop(var, None)
    trainer = REPO / "trainer"
    note = "worktree trainer/"
    if not (trainer / "__main__.py").is_file():
        trainer, note = standin_trainer(work / "standin" / "trainer"), "a stand-in trainer"
    rows = []
    try:
        url = local.start_service()
        t0 = time.monotonic()
        importer = PodmanEngine(url)
        try:
            make_offline_base(BaseSpec(tag=BASE_TAG), base_cache, importer)
        finally:
            importer.close()
        base_s = time.monotonic() - t0
        for kind in ("podman", "docker") if args.engine == "both" else (args.engine,):
            rows.append(bench(kind, url, wheelhouse, trainer, work, env))
    finally:
        local.stop_service()
        if not args.keep:
            local.podman("system", "reset", "--force", check=False)
            shutil.rmtree(work, ignore_errors=True)
            shutil.rmtree(local.runroot.parent, ignore_errors=True)

    print(
        f"trainimg build benchmark: cell {cell.name}, {note}, fresh podman store, "
        f"air-gapped from {wheelhouse}; base import {base_s:.1f}s; {os.cpu_count()} CPUs"
    )
    head = (
        "engine",
        "cold build",
        "no-op rebuild",
        "trainer-only rebuild",
        "cached steps",
        "image size",
    )
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    for r in rows:
        pct = 100 * r.trainer_only / r.cold
        print(
            f"| {r.engine} | {r.cold:.1f} s | {r.noop:.2f} s | {r.trainer_only:.2f} s "
            f"({pct:.1f}% of cold) | {r.cached} | {r.size / 1e9:.3f} GB |"
        )
    print("| target | - | <= 2 s | <= 10% of cold | - | <= 1.2 GB |")
    ok = all(r.noop <= 2 and r.trainer_only <= 0.1 * r.cold and r.size <= 1.2e9 for r in rows)
    print("all targets met" if ok else "some target missed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
