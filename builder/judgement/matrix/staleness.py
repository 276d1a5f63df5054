"""Rules about the matrix as a whole falling behind: its newest torch per CUDA line against the
newest release published for that line (builder/facts/data/torch_pypi.json), and the facts data
files against the day they were read. Both warn: a frozen line is a choice, an old fact a risk."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence

from packaging.version import Version

from builder.facts import cuda as cuda_rules
from builder.facts import data_files, torch_builds
from builder.facts.sources import Source
from builder.judgement.finding import Finding
from builder.judgement.matrix.apply import ALL_CELLS, StaleLimits
from builder.judgement.registry import check
from builder.judgement.severity import WARN
from builder.matrix.model import Cell


def _line(cell: Cell) -> str:
    """The torch line a cell is on: its CUDA build tag (cu128, cu130, ...) or cpu."""
    return cuda_rules.cuda_tag(cell.cuda.version) if cell.cuda is not None else "cpu"


def _newest_release(line: str) -> Version | None:
    """The newest torch release PyPI publishes for a line (every release has a CPU build; a
    cu128 release is one PyTorch's cu128 index has)."""
    releases = [r.version for r in data_files.TORCH_RELEASES]
    if line == "cpu":
        return max(releases, default=None)
    return max((v for v in releases if torch_builds.has_build(v, line)), default=None)


def _minors_behind(have: Version, newest: Version) -> int:
    return (newest.major - have.major) * 100 + newest.minor - have.minor


def _torch_lines(cells: Sequence[Cell], limits: StaleLimits) -> Iterator[tuple[Cell, Finding]]:
    newest_cells: dict[str, Cell] = {}
    for c in cells:
        line = _line(c)
        if line not in newest_cells or c.torch > newest_cells[line].torch:
            newest_cells[line] = c
    src = (torch_builds.PYPI_CUDA_BUILD_SOURCE,)
    for line, cell in sorted(newest_cells.items()):
        newest = _newest_release(line)
        have = Version(cell.torch.public)
        if newest is None or _minors_behind(have, newest) <= limits.minors:
            continue
        yield (
            cell,
            Finding(
                "matrix.stale",
                WARN,
                f"the newest {line} cell's torch {have} is {_minors_behind(have, newest)} minors "
                f"behind torch {newest}, the newest release with a {line} build (more than "
                f"{limits.minors}, --stale-minors)",
                f"add a cell with torch {newest} to the {line} line (or raise --stale-minors)",
                src,
                "torch",
            ),
        )
    if any(c.cuda is not None for c in cells):
        newest_cuda = max((c for c in cells if c.cuda is not None), key=lambda c: c.torch)
        on_pypi = [r.version for r in data_files.TORCH_RELEASES if r.cuda]
        top = max(on_pypi, default=None)
        have = Version(newest_cuda.torch.public)
        if top is not None and _minors_behind(have, top) > limits.minors:
            yield (
                newest_cuda,
                Finding(
                    "matrix.stale",
                    WARN,
                    f"the matrix's newest CUDA torch is {have}, {_minors_behind(have, top)} minors "
                    f"behind torch {top} ({torch_builds.pypi_cuda_build(top)} on PyPI; more than "
                    f"{limits.minors}, --stale-minors)",
                    f"add a line for {torch_builds.pypi_cuda_build(top)} (or raise --stale-minors)",
                    src,
                    "torch",
                ),
            )


def _old_facts(cells: Sequence[Cell], today: dt.date, limits: StaleLimits) -> Iterator[Finding]:
    for f in data_files.DATA_FILES:
        age = (today - f.read).days
        if age > limits.days:
            yield Finding(
                "matrix.stale",
                WARN,
                f"{f.path.name} was read from its source {age} days ago ({f.read}; more "
                f"than {limits.days}, --stale-days)",
                "run `trainimg facts refresh`, review the diff, then --write",
                (Source(f.source),),
            )


@check("matrix.stale", "matrix", reads=(ALL_CELLS,))
def _matrix_stale(
    cells: Sequence[Cell], today: dt.date, limits: StaleLimits
) -> Iterator[tuple[Cell, Finding]]:
    """the matrix's newest torch per CUDA line keeps up with the releases, and its facts are
    recent (warns only)"""
    yield from _torch_lines(cells, limits)
    if cells:
        yield from ((cells[0], f) for f in _old_facts(cells, today, limits))
