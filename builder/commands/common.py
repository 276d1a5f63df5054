"""Options most subcommands share (--matrix and --today; --engine and --url for those that talk
to an engine; a driver version for preflight and compat), and the workspace a command opens from
its --matrix and --today.

`trainimg env` takes none of them. Not every workspace is opened here: preflight opens one per
--matrix it is given, and verify the matrix an image's cell came from (builder/verify/target.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
from pathlib import Path

from builder.facts.driver_version import DriverVersion
from builder.lock import DEFAULT_PATH as DEFAULT_LOCK
from builder.workspace import DEFAULT_MATRIX, Workspace, open_workspace


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date {text!r}: expected YYYY-MM-DD") from None


def shared_options() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument(
        "--matrix",
        default=os.environ.get("TRAINIMG_MATRIX", DEFAULT_MATRIX),
        help="the compatibility matrix (default: $TRAINIMG_MATRIX or ./matrix.yaml)",
    )
    p.add_argument(
        "--today",
        type=_date,
        default=None,
        help="judge end-of-life dates as of this day (YYYY-MM-DD; default: today)",
    )
    return p


def workspace(args: argparse.Namespace, *, strict: bool = True) -> Workspace:
    return open_workspace(args.matrix, args.today, strict=strict)


def lock_file(args: argparse.Namespace, ws: Workspace) -> Path:
    """--lock, else the workspace's images/lock.json."""
    return Path(args.lock) if args.lock else ws.root / DEFAULT_LOCK


def add_engine_options(p: argparse.ArgumentParser) -> None:
    """--engine and --url, as every command that talks to a container engine takes them."""
    from builder.engines.discover import ENGINE_NAMES  # only commands that use an engine

    p.add_argument(
        "--engine",
        choices=ENGINE_NAMES,
        default=os.environ.get("TRAINIMG_ENGINE") or None,
        help="podman (podman-py) or docker (docker SDK); default: $TRAINIMG_ENGINE or discovery",
    )
    p.add_argument(
        "--url", help="the engine's API URL (unix:///..., tcp://...); default: discovery"
    )


def driver_argument(text: str) -> DriverVersion:
    """An argparse type for a driver version (`trainimg preflight --target-driver`, `trainimg
    compat --driver`)."""
    try:
        return DriverVersion.planned(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
