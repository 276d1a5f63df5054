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
import tempfile
from pathlib import Path

from builder.build.lock import DEFAULT_PATH as DEFAULT_LOCK
from builder.config import configured
from builder.errors import TrainimgError
from builder.facts.driver_version import DriverVersion
from builder.host.shown import shown
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


def add_quiet_option(p: argparse.ArgumentParser) -> None:
    """-q/--quiet, as every command with long steps takes it (builder/progress.py)."""
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress on stderr (the step lines and the heartbeat every few seconds); "
        "results and errors still print, exit codes are the same",
    )


def workspace(args: argparse.Namespace, *, strict: bool = True) -> Workspace:
    return open_workspace(args.matrix, args.today, strict=strict)


def lock_file(args: argparse.Namespace, ws: Workspace) -> Path:
    """--lock, else the workspace's images/lock.json."""
    return Path(args.lock) if args.lock else ws.root / DEFAULT_LOCK


def add_engine_options(p: argparse.ArgumentParser) -> None:
    """--engine and --url, as every command that talks to a container engine takes them."""
    from builder.engines.discover import ENGINE_NAMES  # only commands that use an engine

    chosen = configured("engine")
    p.add_argument(
        "--engine",
        choices=ENGINE_NAMES,
        type=_engine_name,
        default=_FromEnv(chosen.value) if chosen.source.startswith("env") else chosen.value,
        help=f"podman (podman-py) or docker (docker SDK); default: ${ENGINE_ENV}, else "
        "`engine` in the config file (`trainimg config show`), else discovery",
    )
    p.add_argument(
        "--url",
        type=_engine_url,
        help="the engine's API URL (unix:///..., tcp://..., ssh://...); default: discovery",
    )


ENGINE_ENV = "TRAINIMG_ENGINE"
# How a --help says where an option's default comes from (builder/config.py).
FROM_CONFIG = "`trainimg config show` says which value applies and why"


class Configured(str):
    """An option's value that no flag gave (builder/config.py): it says where it came from,
    so a message about it names that place, not a flag the user never typed."""

    source: str = "default"


def configured_value(name: str) -> Configured | None:
    """The value of setting `name` without its flag, with its source; None when unset."""
    setting = configured(name)
    if setting.value is None:
        return None
    value = Configured(setting.value)
    value.source = setting.source
    return value


def said(option: str, value: str) -> str:
    """How a message names an option's value: `--registry X`, or `registry X (from SOURCE)`
    when it was not typed."""
    if isinstance(value, Configured):
        return f"{option.lstrip('-')} {value} (from {value.source})"
    return f"{option} {value}"


REGISTRY_HELP = (
    "default: $TRAINIMG_REGISTRY, else `registry` in the config file (" + FROM_CONFIG + ")"
)


def wheelhouse_default() -> str:
    """The wheelhouse without --wheelhouse: $TRAINIMG_WHEELHOUSE, the config file's
    `wheelhouse`, else .cache/wheelhouse."""
    return str(configured("wheelhouse").value)


class _FromEnv(str):
    """A default read from the environment: argparse passes string defaults through `type`
    (never through `choices`), so a bad $TRAINIMG_ENGINE is caught there and named."""


def _engine_name(text: str) -> str:
    from builder.engines.discover import ENGINE_NAMES

    if isinstance(text, _FromEnv) and text not in ENGINE_NAMES:
        raise argparse.ArgumentTypeError(
            f"${ENGINE_ENV}={shown(text)} is not an engine: set it to "
            f"{' or '.join(ENGINE_NAMES)}, or unset it"
        )
    return str(text)


def _engine_url(text: str) -> str:
    from builder.engines.discover import url_problem

    problem = url_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{shown(text)}: {problem}")
    return text


def driver_argument(text: str) -> DriverVersion:
    """An argparse type for a driver version (`trainimg preflight --target-driver`, `trainimg
    compat --driver`)."""
    try:
        return DriverVersion(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _nearest_existing(path: Path) -> Path:
    here = path
    while not here.exists() and here != here.parent:
        here = here.parent
    return here


def _probe_writable(directory: Path, said: str) -> None:
    """Create and remove a file in `directory`: the one honest test (root passes os.access on
    a read-only mount; /sys refuses even root)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".trainimg-probe-", dir=directory)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise TrainimgError(f"{said}: cannot write in {shown(directory)}: {exc.strerror}") from None
    space = os.statvfs(directory)
    if space.f_bavail == 0:
        raise TrainimgError(f"{said}: cannot write in {shown(directory)}: its filesystem is full")


def output_file(text: str, option: str = "-o") -> Path:
    """The file a command will write (-o/--output), checked before any work: not a directory,
    not a device or other special file (a rename would replace it), and its directory - or
    the nearest one that exists, where the missing ones would be made - takes a new file."""
    path = Path(text)
    said = f"{option} {shown(text)}"
    if path.is_dir():
        raise TrainimgError(f"{said}: is a directory; name a file (e.g. {shown(path / 'out')})")
    if path.exists() and not path.is_file():
        raise TrainimgError(f"{said}: exists and is not a regular file; name a new file")
    where = _nearest_existing(path.parent if str(path.parent) else Path("."))
    if not where.is_dir():
        raise TrainimgError(f"{said}: {shown(where)} is not a directory")
    _probe_writable(where, said)
    return path


def output_dir(path: Path, option: str) -> Path:
    """A directory a command will fill (--dest), checked before any work: a directory or not
    there yet, and writable where it is (or where it would be made)."""
    said = f"{option} {shown(path)}"
    if path.exists() and not path.is_dir():
        raise TrainimgError(f"{said}: is a file, not a directory")
    where = _nearest_existing(path)
    if not where.is_dir():
        raise TrainimgError(f"{said}: {shown(where)} is not a directory")
    _probe_writable(where, said)
    return path
