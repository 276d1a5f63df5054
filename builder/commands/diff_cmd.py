"""`trainimg diff IMAGE1 IMAGE2`: where two images differ - labels, configuration, layers, and
the files of each layer that differs (builder/image_diff/). Both are saved from the engine into
a temporary directory first. Exit codes: 0 the same image id, 1 they differ, 2 bad input."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from builder.commands.common import add_engine_options, shared_options
from builder.engines.discover import engine_session
from builder.engines.roles import ImageExport
from builder.image_diff.archive import SavedImage, layer_entries, read_saved
from builder.image_diff.compare import ImageDiff, compare_config, compare_files, compare_layers
from builder.verify.target import resolve_image


def register(sub: Any) -> None:
    p = sub.add_parser(
        "diff",
        parents=[shared_options()],
        description=(
            "Compare IMAGE1 and IMAGE2 (ids or references in the engine's store, or matrix "
            "cells, whose images are <project.repository>:<cell>): their labels "
            "and configuration, their layers by diff id, and for every layer that differs the "
            "paths added (+), removed (-) or changed (~, with what: content, mode, owner, "
            "mtime, link). Exit codes: 0 the same image, 1 they differ, 2 bad input."
        ),
    )
    p.add_argument("image1", metavar="IMAGE1")
    p.add_argument("image2", metavar="IMAGE2")
    p.add_argument("--files", type=int, default=20, help="paths shown per layer (default 20)")
    p.add_argument("--tmp", help="where the images are saved while compared (default: $TMPDIR)")
    add_engine_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    first, second = (resolve_image(t, args.matrix) for t in (args.image1, args.image2))
    with engine_session(args.engine, args.url) as engine:
        a, b = engine.inspect_image(first), engine.inspect_image(second)
        if a.id == b.id:
            print(f"{args.image1} and {args.image2} are the same image ({a.id})")
            return 0
        with tempfile.TemporaryDirectory(prefix="trainimg-diff-", dir=args.tmp) as tmp:
            saved = [
                _saved(engine, image, Path(tmp) / f"{n}.tar")
                for n, image in enumerate((a.id, b.id))
            ]
            diff = ImageDiff()
            compare_config(saved[0].config, saved[1].config, diff)
            compare_layers(saved[0].diff_ids, saved[1].diff_ids, diff)
            for i in diff.differing_layers:  # a layer one image lacks: all its files, +/-
                diff.files[i] = compare_files(
                    layer_entries(saved[0], i) if i < len(saved[0].layers) else {},
                    layer_entries(saved[1], i) if i < len(saved[1].layers) else {},
                )
    print(f"{args.image1} ({a.id[:19]}) and {args.image2} ({b.id[:19]}) differ:")
    print(diff.text(args.files))
    return 1


def _saved(engine: ImageExport, image: str, path: Path) -> SavedImage:
    """`image` saved from the engine to `path` (a docker archive), and read."""
    with path.open("wb") as out:
        engine.save(image, out)
    return read_saved(path)
