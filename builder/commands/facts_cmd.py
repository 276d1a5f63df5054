"""`trainimg facts refresh [--write]`: the facts data files as PyPI's own metadata says them
today, shown as a diff to review (--write replaces the file whole: temp file, then rename)."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from builder.atomic_file import atomic_write
from builder.errors import TrainimgError
from builder.facts import data_files
from builder.pypi.index import PYPI_SIMPLE, Index
from builder.pypi.refresh import diff, facts_text, refreshed


def _version(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        raise argparse.ArgumentTypeError(f"not a version {text!r}: expected e.g. 2.10") from None


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date {text!r}: expected YYYY-MM-DD") from None


def register(sub: Any) -> None:
    p = sub.add_parser("facts")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    r = verbs.add_parser(
        "refresh",
        help="read torch's releases from the index (PEP 691 + PEP 658) and diff the facts file",
    )
    r.add_argument("--index", default=PYPI_SIMPLE,
                   help=f"the simple index root (default: {PYPI_SIMPLE})")  # fmt: skip
    r.add_argument("--since", type=_version, default=Version("2.10"),
                   help="read releases from this version on (default: 2.10)")  # fmt: skip
    r.add_argument("--timeout", type=float, default=30.0,
                   help="deadline in seconds for each request (default: 30)")  # fmt: skip
    r.add_argument("--today", type=_date, default=None,
                   help="the read date written into the file (default: today)")  # fmt: skip
    r.add_argument("--file", type=Path, default=data_files.TORCH_PYPI_FILE,
                   help="the facts file to refresh (default: torch_pypi.json)")  # fmt: skip
    r.add_argument("--write", action="store_true",
                   help="rewrite the file (atomically), not only print the diff")  # fmt: skip
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.timeout <= 0:
        raise TrainimgError(f"--timeout {args.timeout:g}: must be a positive number of seconds")
    path: Path = args.file
    old_text = path.read_text(encoding="utf-8")
    current = data_files.load_data_file(path)
    today = args.today or dt.date.today()
    new = refreshed(current, Index(args.index, args.timeout), today, args.since)
    new_text = facts_text(new)
    changes = diff(old_text, new_text, path.name)
    if not changes:
        print(f"{path.name}: up to date with {args.index} ({today})")
        return 0
    print(changes, end="")
    if args.write:
        atomic_write(path, new_text)
        print(f"wrote {path}")
        return 0
    print(f"{path.name}: behind the index; review the diff, then rerun with --write")
    return 1
