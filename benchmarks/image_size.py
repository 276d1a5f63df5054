"""Image sizes, layer by layer: what each instruction adds to the CPU and cu128 images.

    .venv/bin/python benchmarks/image_size.py [IMAGE ...] [--podman-root DIR]

Default images: the CPU and cu128 cells' `<project.repository>:<cell>` tags in the isolated
podman store the tests use (.cache/test/podman; build them with the test suite or
scripts/cu128.sh and point --podman-root at that store). Prints every layer's size and the
instruction that made it (from `podman history`), the total, and the targets of issue 23:
CPU <= 1.2 GB including the compiler, cu128 runtime <= 7.2 GB (issue 9 had 8 GB, 40 % of NGC
PyTorch's ~20 GB), and the largest layer (a changed wheel re-pushes its group's layer only; the
CUDA wheels are split by library: builder/spec/wheel_groups.py). Sizes are uncompressed, in
decimal GB/MB as podman reports them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from builder.engines.local_podman import LocalPodman
from builder.workspace import open_workspace

REPO = Path(__file__).resolve().parent.parent
CPU_CELL = "debian12-cpu-py3.11-torch2.13.0-runtime"
CU128_CELL = "debian12-cu128-py3.11-torch2.9.1-runtime"
TARGETS = {CPU_CELL: 1.2e9, CU128_CELL: 7.2e9}


def _what(created_by: str) -> str:
    text = " ".join(created_by.replace("/bin/sh -c #(nop) ", "").replace("|0 ", "").split())
    return text if len(text) <= 88 else text[:85] + "..."


def layers(podman: LocalPodman, image: str) -> list[tuple[int, str]]:
    """(size in bytes, instruction) per history entry, oldest first, empty ones left out."""
    history = json.loads(podman.podman("history", "--format", "json", image))
    out = []
    for entry in reversed(history):
        size = int(entry.get("size") or entry.get("Size") or 0)
        if size:
            out.append((size, _what(entry.get("CreatedBy") or entry.get("createdBy") or "")))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("images", nargs="*", metavar="IMAGE")
    p.add_argument("--podman-root", type=Path, default=REPO / ".cache" / "test" / "podman")
    args = p.parse_args(argv)
    repo = open_workspace(REPO / "matrix.yaml").matrix.project.repository
    images = args.images or [f"{repo}:{CPU_CELL}", f"{repo}:{CU128_CELL}"]
    podman = LocalPodman(args.podman_root)
    podman.configure()
    summary = []
    for image in images:
        rows = layers(podman, image)
        total = sum(size for size, _ in rows)
        print(f"\n{image}")
        print(f"{'size':>10}  {'share':>6}  layer")
        for size, what in rows:
            print(f"{size / 1e6:8.1f}MB  {100 * size / total:5.1f}%  {what}")
        print(f"{total / 1e9:8.2f}GB  total")
        biggest = max(rows, default=(0, ""))
        print(f"{biggest[0] / 1e6:8.1f}MB  largest layer")
        cell = image.rsplit(":", 1)[-1]
        summary.append((image, total, TARGETS.get(cell)))
    print(f"\n{'image':<70} {'size':>8} {'target':>8}  verdict")
    worst = 0
    for image, total, target in summary:
        verdict = "-" if target is None else ("ok" if total <= target else "OVER")
        worst |= verdict == "OVER"
        shown = f"{target / 1e9:.1f}GB" if target else "-"
        print(f"{image:<70} {total / 1e9:7.2f}GB {shown:>8}  {verdict}")
    return 1 if worst else 0


if __name__ == "__main__":
    sys.exit(main())
