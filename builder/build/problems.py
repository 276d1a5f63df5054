"""`trainimg build --plan`: every problem of every selected cell at once, nothing built.

A build stops at its first problem (exit 2), which is right for a build and slow for a person
fixing a matrix of many cells: --plan asks every question a build asks before it starts - the
options, the trainer, the committed Containerfile against a fresh render, the wheelhouse
closure and hashes, the stage networks, the base image in the engine's store - of every cell,
and lists each cell's answers. The messages are the build's own (builder/build/plan.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path

from builder.build.plan import (
    NO_WHEELHOUSE,
    BuildOptions,
    base_missing,
    drifted,
    networks_of,
)
from builder.build.wheelhouse import select
from builder.engines.roles import RegistryTransfer
from builder.errors import TrainimgError
from builder.matrix.mirrors import with_mirrors_file
from builder.matrix.model import Cell
from builder.registry.auth import refuse_credentials_in_buildargs
from builder.spec.trainer_version import trainer_version
from builder.workspace import Workspace


def _asked(problems: list[str], question: Callable[[], object]) -> None:
    """Ask `question`; a TrainimgError is one more problem (anything else is a bug: raised)."""
    try:
        question()
    except TrainimgError as exc:
        problems.append(str(exc))


def shared_problems(ws: Workspace, opts: BuildOptions) -> list[str]:
    """What would stop every cell: the trainer, the build arguments, the mirrors file."""
    out: list[str] = []
    _asked(out, lambda: trainer_version(opts.trainer_dir or ws.root / "trainer"))
    _asked(out, lambda: refuse_credentials_in_buildargs(dict(opts.buildargs)))
    if opts.mirrors is not None:
        mirrors: Path = opts.mirrors
        _asked(out, lambda: with_mirrors_file(ws.matrix, mirrors))
    if opts.wheelhouse is None:
        out.append(NO_WHEELHOUSE)
    return out


def cell_problems(
    ws: Workspace,
    cells: Sequence[Cell],
    engine: RegistryTransfer | None,
    opts: BuildOptions,
    no_engine: str = "",
) -> dict[str, list[str]]:
    """Each cell's problems, in the order a build meets them; `engine` None: the base is not
    checked and `no_engine` says why."""
    _, drift = drifted(ws, cells)
    out: dict[str, list[str]] = {}
    for cell in cells:
        problems = [drift[cell.name]] if cell.name in drift else []
        if opts.wheelhouse is not None:
            wheelhouse: Path = opts.wheelhouse
            _asked(problems, functools.partial(select, wheelhouse, cell, ws.matrix.project))
        _asked(problems, functools.partial(networks_of, cell, opts.network))
        if engine is None:
            problems.append(
                f"cell {cell.name}: base image {cell.os.base_ref} not checked: {no_engine}"
            )
        else:
            missing = base_missing(engine, cell, opts.pull)
            if missing is not None:
                problems.append(missing)
        out[cell.name] = problems
    return out


def plan_lines(shared: list[str], per_cell: dict[str, list[str]]) -> list[str]:
    """The report: the problems every cell shares, then each cell, ok or its problems."""
    lines = [f"every cell: {p}" for p in shared]
    for name, problems in per_cell.items():
        lines.append(f"{name}: " + ("ok" if not problems else f"{len(problems)} problem(s)"))
        lines += [f"  - {p}" for p in problems]
    bad = sum(1 for p in per_cell.values() if p)
    lines.append(
        f"plan: {len(per_cell)} cell(s), {bad} with problems"
        + (f", {len(shared)} shared by every cell" if shared else "")
        + ("; nothing would stop a build" if not bad and not shared else "")
    )
    return lines
