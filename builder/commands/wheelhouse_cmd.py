"""`trainimg wheelhouse [CELL ...]`: fill a wheelhouse for air-gapped builds, with its lock."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from builder.build.wheelhouse import LOCK_NAME, PYPI, fill, select
from builder.commands.common import (
    FROM_CONFIG,
    add_quiet_option,
    output_dir,
    shared_options,
    wheelhouse_default,
    workspace,
)
from builder.errors import TrainimgError
from builder.progress import Progress

DEFAULT_FIND_LINKS = (Path("/opt/wheels"),)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "wheelhouse",
        parents=[shared_options()],
        description=(
            "Put the whole dependency closure of the CELLs' pins (default: project.default_cell; "
            "--all: every cell), for each cell's Python and platform, into DEST: copied from "
            "--find-links directories first (default: /opt/wheels when it exists), the rest with "
            f"`pip download`; then write DEST/{LOCK_NAME} (sha256 of each wheel), from which "
            "`trainimg build --wheelhouse DEST` derives hash-pinned requirements. --check only "
            "checks."
        ),
    )
    p.add_argument("cells", nargs="*", metavar="CELL", help="cells; globs too: 'rocky9-*'")
    p.add_argument("--all", action="store_true", help="every cell of the matrix")
    p.add_argument(
        "--dest",
        type=Path,
        default=Path(wheelhouse_default()),
        help="the wheelhouse (default: $TRAINIMG_WHEELHOUSE, else `wheelhouse` in the config "
        f"file, else .cache/wheelhouse; {FROM_CONFIG})",
    )
    p.add_argument(
        "--find-links",
        type=Path,
        action="append",
        default=None,
        metavar="DIR",
        help="a local directory of wheels to take from first (repeatable; default /opt/wheels)",
    )
    p.add_argument("--index-url", default=PYPI, help=f"where pip downloads from (default {PYPI})")
    p.add_argument("--offline", action="store_true", help="never download: only local wheels")
    p.add_argument(
        "--check",
        action="store_true",
        help=f"change nothing: exit 1 unless DEST holds every cell's closure, matching {LOCK_NAME}",
    )
    add_quiet_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.check:
        output_dir(args.dest, "--dest")
    ws = workspace(args)
    if args.all and args.cells:
        raise TrainimgError("give CELL names or --all, not both")
    cells = ws.cells if args.all else ws.select(args.cells or [ws.matrix.project.default_cell])
    project = ws.matrix.project
    if args.check:
        bad = 0
        for cell in cells:
            try:
                sel = select(args.dest, cell, project)
            except TrainimgError as exc:
                print(f"{cell.name}: {exc}", file=sys.stderr)
                bad += 1
                continue
            groups = ", ".join(f"{g} {len(sel.in_group(g))}" for g in sel.groups)
            print(f"{cell.name}: closure of {len(sel.wheels)} wheels ({groups}), hash-checked")
        return 1 if bad else 0
    progress = Progress(quiet=args.quiet)
    links = (
        args.find_links
        if args.find_links is not None
        else [d for d in DEFAULT_FIND_LINKS if d.is_dir()]
    )
    report = fill(
        args.dest,
        cells,
        project,
        find_links=links,
        index_url=args.index_url,
        offline=args.offline,
        log=lambda m: progress.say(f"wheelhouse: {m}"),
        progress=progress,
    )
    print(
        f"{args.dest}: {len(report.copied)} copied, {len(report.downloaded)} downloaded, "
        f"{len(report.present)} already present; lock {report.lock}"
    )
    return 0
