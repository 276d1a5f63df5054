"""Time to load, expand, check and render a 1,000-cell matrix (target: <= 1 s in all).

Prints a table; it asserts nothing (speed targets live here, not in timed tests).
Run: .venv/bin/python benchmarks/render_bench.py
"""

from __future__ import annotations

import datetime as dt
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from builder.judgement.matrix import check_cell  # noqa: E402
from builder.matrix.expand import expand  # noqa: E402
from builder.matrix.load import parse_matrix  # noqa: E402
from builder.spec.cell_hash import with_cell_hashes  # noqa: E402
from builder.spec.render import render_all  # noqa: E402

EL9_OS = """\
  {key}:
    distro: {distro}
    base: quay.io/example/{key}:9
    digest: sha256:{digest}
    python:
      "3.11": {{package: python3.11, version: 3.11.11-1.el9}}
      "3.12": {{package: python3.12, version: 3.12.9-1.el9}}
    gcc:
      "11": {{gcc: 11.5.0-5.el9, gcc-c++: 11.5.0-5.el9}}
"""


def big_matrix(n_os: int) -> str:
    base = (REPO / "tests" / "data" / "minimal.yaml").read_text(encoding="utf-8")
    head, _, _ = base.partition("oses:\n")
    oses = "".join(
        EL9_OS.format(key=f"el9-{i:02d}", distro=("rocky9", "ubi9", "centos-stream9")[i % 3],
                      digest=f"{i:064x}")
        for i in range(n_os)
    )  # fmt: skip
    rest = base[base.index("drivers:") :].split("groups:")[0]
    rest = rest.replace(
        "drivers:\n",
        'drivers:\n  r570-open: {branch: "570", min_version: 570.124.06, kernel_module: open}\n'
        '  r575-open: {branch: "575", min_version: 575.57.08, kernel_module: open}\n',
    )
    group = f"""groups:
  - name: big
    axes:
      os: [{", ".join(f"el9-{i:02d}" for i in range(n_os))}]
      accelerator: [cuda]
      driver: [r570-open, r575-open, r580-open]
      cuda: [12.8.1]
      gcc: ["11"]
      python: ["3.11", "3.12"]
      torch: [2.8.0, 2.9.1, 2.10.0, 2.11.0]
      fp8: [torchao, none]
      flavour: [runtime, devel]
    gpus: [h100, b200, rtx5090]
"""
    head = head.replace(
        'name_format: "{os}-{accelerator}-py{python}-torch{torch}-{flavour}"',
        'name_format: "{os}-{accelerator}-{driver}-py{python}-torch{torch}-{fp8}-{flavour}"',
    )
    return head + "oses:\n" + oses + rest + group


def main() -> None:
    text = big_matrix(11)
    today = dt.date(2026, 11, 29)
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        matrix = parse_matrix(text, "big.yaml")
        t1 = time.perf_counter()
        expansion = with_cell_hashes(expand(matrix), matrix.project)
        t2 = time.perf_counter()
        for cell in expansion.cells:
            check_cell(cell, today)
        t3 = time.perf_counter()
        render_all(REPO, expansion.cells, matrix.project)
        t4 = time.perf_counter()
        runs.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0))
    cells = len(expansion.cells)
    print(f"{cells} cells, median of {len(runs)} runs")
    print(f"{'phase':<10} {'seconds':>8}")
    for i, phase in enumerate(("load", "expand", "check", "render", "total")):
        print(f"{phase:<10} {statistics.median(r[i] for r in runs):8.3f}")
    total = statistics.median(r[4] for r in runs)
    print(f"target: <= 1.000 s for load+expand+render -> {'met' if total <= 1 else 'MISSED'}")


if __name__ == "__main__":
    main()
