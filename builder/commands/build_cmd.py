"""`trainimg build [CELL ...]`: build cells through podman-py or the docker SDK, tag, record.

No CELL builds the matrix's `project.default_cell`; `--all` builds every cell. Exit codes:
0 built or up to date; 1 a cell's build failed; 2 nothing could start (no engine, drift,
missing base or wheel, bad option); 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from builder.build import lock as lockfile
from builder.build import problems
from builder.build.builder import Builder, BuildsFailed, Outcome
from builder.build.plan import (
    BuildOptions,
    default_paths,
    plan_cells,
    plan_each,
    refuse_bad_options,
)
from builder.commands.build_output import RichUi, summary
from builder.commands.common import (
    FROM_CONFIG,
    add_engine_options,
    shared_options,
    wheelhouse_default,
    workspace,
)
from builder.engines import proxy
from builder.engines.base import EngineError, EngineUnavailable
from builder.engines.discover import HOW_TO_START, EngineSearch, discover
from builder.errors import TrainimgError
from builder.matrix.model import Cell
from builder.progress import Progress
from builder.workspace import Workspace

_BUILD_ARG = re.compile(r"^([A-Za-z_][A-Za-z0-9_]{0,127})=([^\n\r\x00]*)$")
_REPOSITORY = re.compile(
    r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?::[0-9]{1,5})?(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$"
)
_NETWORK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "build",
        parents=[shared_options()],
        description=(
            "Build each CELL (default: the matrix's project.default_cell; --all: every cell) "
            "from its rendered Containerfile, tag it <repo>:<cell> and <repo>:<build hash>, "
            "and record it in images/lock.json. A cell whose build-hash tag exists is not "
            "built again. Exit codes: 0 ok, 1 a build failed, 2 could not start, 130 interrupted."
        ),
    )
    p.add_argument(
        "cells",
        nargs="*",
        metavar="CELL",
        help="cells to build (see `trainimg matrix list`); globs too: 'rocky9-*'",
    )
    p.add_argument("--all", action="store_true", help="build every cell of the matrix")
    add_engine_options(p)
    p.add_argument(
        "--wheelhouse",
        type=Path,
        metavar="DIR",
        default=Path(wheelhouse_default()),
        help="install wheels only from DIR (--no-index --require-hashes, no network): each "
        "cell's whole dependency closure, hash-checked against DIR/wheelhouse.lock; default: "
        "$TRAINIMG_WHEELHOUSE, else `wheelhouse` in the config file, else .cache/wheelhouse "
        f"(`trainimg wheelhouse` fills it; {FROM_CONFIG})",
    )
    p.add_argument(
        "--network",
        metavar="NET",
        help="network of the stage that installs OS packages (EL9 cells: dnf from their "
        "repositories or a mirror; host, bridge, a network name); default: the engine's own. "
        "Every stage that installs wheels builds with none; a cell without OS packages (the "
        "Debian cells) builds with NET (default none)",
    )
    p.add_argument(
        "--mirrors",
        type=Path,
        metavar="FILE",
        help="a YAML file with matrix.yaml's `mirrors:` (each EL9 OS's repositories and "
        "NVIDIA's CUDA repository: baseurls, the key's sha256, an optional CA), laid over the "
        "matrix's own for this build (docs/build.md)",
    )
    _add_build_options(p)
    p.add_argument(
        "--repository", help="image repository (default: the matrix's project.repository)"
    )
    p.add_argument(
        "--trainer",
        type=Path,
        metavar="DIR",
        help="the trainer package to bundle (default: ./trainer)",
    )
    p.add_argument(
        "--lock", type=Path, metavar="PATH", help="the build record (default: images/lock.json)"
    )
    p.add_argument(
        "--quiet", "-q", action="store_true", help="show only build steps, not their output"
    )
    p.add_argument(
        "--keep-going",
        "-k",
        action="store_true",
        help="a cell that cannot start (drift, a wheel missing from the wheelhouse, its base "
        "not in the store, a network it cannot build with) does not stop the others: they "
        "build, and the end lists every failed cell with its reason (a failing build never "
        "stops the others). Exit 2 when a cell could not start, else 1 when a build failed",
    )
    p.add_argument(
        "--plan",
        action="store_true",
        help="build nothing: list every problem of every selected cell at once (drift, "
        "wheelhouse, networks, base image, options); exit 0 when none, else 2",
    )
    p.set_defaults(func=run)


def _add_build_options(p: argparse.ArgumentParser) -> None:
    """How each image is built: pulls, build arguments, proxy, parallelism, caches."""
    p.add_argument(
        "--pull",
        action="store_true",
        help="pull registry bases (always; locally made bases are never pulled)",
    )
    p.add_argument(
        "--build-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a build argument (repeatable); part of the build hash",
    )
    p.add_argument(
        "--proxy",
        metavar="URL",
        help="HTTP proxy for the RUN steps (default: the host's http(s)_proxy, no_proxy); "
        "credentials allowed: kept out of the image, the lock, the log and the build hash",
    )
    p.add_argument(
        "--jobs", "-j", type=int, default=1, metavar="N", help="cells built at once (default 1)"
    )
    p.add_argument("--no-cache", action="store_true", help="do not reuse cached layers")
    p.add_argument(
        "--no-layers",
        action="store_true",
        help="podman only: no per-step layers (each stage in one container, the image's new "
        "content as one layer): about a third less peak disk, no layer reuse",
    )
    p.add_argument("--force", action="store_true", help="build even if the build-hash tag exists")


def parse_build_args(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        m = _BUILD_ARG.match(item)
        if not m:
            raise TrainimgError(
                f"--build-arg {item!r}: expected KEY=VALUE (KEY a shell-style name, no newline)"
            )
        out[m.group(1)] = m.group(2)
    return out


def _options(args: argparse.Namespace) -> BuildOptions:
    """The build options the flags give, each checked (exit 2 naming the flag)."""
    if args.jobs < 1:
        raise TrainimgError("--jobs must be at least 1")
    if args.network is not None and not _NETWORK.match(args.network):
        raise TrainimgError(f"--network {args.network!r}: not a network name")
    buildargs = parse_build_args(args.build_arg)
    for key in buildargs:
        if key.lower() in proxy.NAMES:
            raise TrainimgError(
                f"--build-arg {key}: a proxy is not a build argument (it would enter the build "
                "hash); trainimg passes the host's http_proxy, https_proxy and no_proxy, or "
                "--proxy URL, to the build's RUN steps and keeps them out of the image"
            )
    build_proxy = proxy.from_environment(os.environ, args.proxy)
    if args.repository is not None and not _REPOSITORY.match(args.repository):
        raise TrainimgError(f"--repository {args.repository!r}: not an image repository name")
    return BuildOptions(
        repository=args.repository,
        wheelhouse=args.wheelhouse.resolve() if args.wheelhouse else None,
        network=args.network,
        pull=args.pull,
        buildargs=buildargs,
        nocache=args.no_cache,
        layers=not args.no_layers,
        force=args.force,
        jobs=args.jobs,
        trainer_dir=args.trainer.resolve() if args.trainer else None,
        lock_path=args.lock,
        mirrors=args.mirrors,
        proxy=build_proxy,
    )


def _plan(
    args: argparse.Namespace, ws: Workspace, cells: Sequence[Cell], opts: BuildOptions
) -> int:
    """--plan: every problem of every cell, printed; the engine only answers what it holds."""
    shared = problems.shared_problems(ws, opts)
    try:
        lockfile.read(default_paths(ws, opts)[0])
    except TrainimgError as exc:
        shared.append(str(exc))
    unchecked = "no engine answered (see 'every cell')"
    try:
        endpoint = discover(EngineSearch(args.engine, args.url), log=lambda m: None)
        engine = endpoint.connect()
    except (TrainimgError, EngineError) as exc:
        shared.append(str(exc))
        per_cell = problems.cell_problems(ws, cells, None, opts, no_engine=unchecked)
    else:
        try:
            per_cell = problems.cell_problems(ws, cells, engine, opts)
        except EngineError as exc:
            shared.append(str(exc))
            per_cell = problems.cell_problems(ws, cells, None, opts, no_engine=unchecked)
        finally:
            engine.close()
            endpoint.close()
    for line in problems.plan_lines(shared, per_cell):
        print(line)
    return 2 if shared or any(per_cell.values()) else 0


def run(args: argparse.Namespace) -> int:
    opts = _options(args)
    ws = workspace(args)
    if args.all and args.cells:
        raise TrainimgError("give CELL names or --all, not both")
    cells = ws.cells if args.all else ws.select(args.cells or [ws.matrix.project.default_cell])
    if args.plan:
        return _plan(args, ws, cells, opts)
    # --keep-going: a cell's own problems are its failure (plan_each), not everyone's
    refuse_bad_options(ws, [] if args.keep_going else cells, opts)
    if args.keep_going and (shared := problems.shared_problems(ws, opts)):
        raise TrainimgError(shared[0])
    lock_path, work_dir = default_paths(ws, opts)
    lockfile.read(lock_path)  # an unreadable lock stops us here, not after a build
    # Not a terminal (CI logs, pipes): wide enough that cell names and tags are not cut.
    wide = sys.stderr.isatty() or os.environ.get("COLUMNS")
    # -q shows the steps only: no heartbeat either. On a terminal the heartbeat's status line
    # and the build's lines share one console, so neither draws over the other.
    progress = Progress(quiet=args.quiet)
    console = progress.console or Console(
        stderr=True, highlight=False, soft_wrap=True, width=None if wide else 160
    )
    ui = RichUi(
        console, multi=args.jobs > 1 and len(cells) > 1, quiet=args.quiet, progress=progress
    )
    search = EngineSearch(args.engine, args.url)
    endpoint = discover(search, log=lambda m: console.print(f"[dim]{m}[/]"))
    try:
        engine = endpoint.connect()
        if not endpoint.url.startswith("unix://"):  # a unix socket was pinged by discovery
            try:
                engine.version()
            except EngineError as exc:
                raise EngineUnavailable(
                    f"engine at {endpoint.url} ({endpoint.source}) does not answer: {exc}; "
                    + HOW_TO_START
                ) from None
        console.print(f"[dim]engine: {endpoint.kind} SDK -> {endpoint.url} ({endpoint.source})[/]")
        refused: dict[str, str] = {}
        try:
            if args.keep_going:
                plans, refused = plan_each(ws, cells, engine, opts)
            else:
                plans = plan_cells(ws, cells, engine, opts)
        finally:
            engine.close()
        builder = Builder(endpoint.connect, opts, lock_path, work_dir, ui)
        try:
            outcomes = builder.run(plans)
        except KeyboardInterrupt:
            console.print(
                "[yellow]interrupted:[/] builds in progress were cancelled; their tags were "
                f"rolled back and {lock_path} keeps their previous records"
            )
            raise
    finally:
        endpoint.close()
    outcomes = with_refused(cells, outcomes, refused)
    summary(console, outcomes)
    failed = [o.cell for o in outcomes if o.status == "failed"]
    tags = {p.cell.name: p.cell_tag for p in plans}
    for o in outcomes:  # stdout: one `<repo>:<cell> <image id>` line per cell, for scripts
        if (not failed or args.keep_going) and o.status in ("built", "skipped"):
            print(f"{tags[o.cell]} {o.image_id}", file=sys.stdout)
    if failed:
        error = TrainimgError if refused else BuildsFailed  # exit 2 as one refusal alone
        raise error(
            f"{len(failed)} of {len(outcomes)} cell(s) failed: {', '.join(failed)} "
            f"({lock_path} keeps their previous records)"
        )
    return 0


def with_refused(
    cells: Sequence[Cell], outcomes: list[Outcome], refused: dict[str, str]
) -> list[Outcome]:
    """Every cell's outcome in the order asked: a cell --keep-going could not start is a
    failure with its reason (it has no log)."""
    by_cell = {o.cell: o for o in outcomes}
    by_cell |= {name: Outcome(name, "failed", error=why) for name, why in refused.items()}
    return [by_cell[c.name] for c in cells]
