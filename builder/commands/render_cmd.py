"""`trainimg render [--check]`: write images/<cell>/Containerfile for every cell, or list drift."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

from builder.atomic_file import atomic_write
from builder.commands.common import shared_options, workspace
from builder.spec.labels import BASE_PINNED_LABEL
from builder.spec.render import Drift, drift, render_all


def register(sub: Any) -> None:
    p = sub.add_parser("render", parents=[shared_options()])
    p.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 and list every file that differs from a fresh render",
    )
    p.set_defaults(func=run)


def write_all(root: Path, outputs: dict[Path, str]) -> Drift:
    """Bring images/ in line with `outputs` (spec/render.py's texts); returns what had drifted
    (what was written). Each file is replaced whole (temp file, then rename)."""
    d = drift(root, outputs)
    for rel in (*d.missing, *d.changed):
        atomic_write(root / rel, outputs[rel])
    for rel in d.stale:
        (root / rel).unlink()
        # the directory may hold other files (notes, build records): then it stays
        with contextlib.suppress(OSError):
            (root / rel).parent.rmdir()
    return d


def run(args: argparse.Namespace) -> int:
    ws = workspace(args)
    outputs = render_all(ws.root, ws.cells, ws.matrix.project)
    unpinned = sorted({c.os.base for c in ws.cells if not (c.os.digest or c.os.local)})
    if unpinned:
        n = sum(1 for c in ws.cells if not (c.os.digest or c.os.local))
        print(
            f"warning: {n} cells use a base not pinned by digest (labelled "
            f"{BASE_PINNED_LABEL}=false): {', '.join(unpinned)}",
            file=sys.stderr,
        )
    if args.check:
        d = drift(ws.root, outputs)
        for label, paths in (("missing", d.missing), ("changed", d.changed), ("stale", d.stale)):
            for path in paths:
                print(f"{label}: {path}")
        if not d.clean:
            print(
                "images/ has drifted from matrix.yaml and the templates: run `trainimg render`",
                file=sys.stderr,
            )
            return 1
        print(f"{len(outputs)} Containerfiles up to date")
        return 0
    d = write_all(ws.root, outputs)
    print(
        f"{len(outputs)} cells: {len(d.missing)} written, {len(d.changed)} updated, "
        f"{len(d.stale)} stale removed, {len(outputs) - len(d.missing) - len(d.changed)} unchanged"
    )
    return 0
