"""A project directory: matrix.yaml, its templates and images/, loaded and checked once."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from builder.cell_hash import with_content_hashes
from builder.errors import MatrixError, TrainimgError
from builder.judgement.matrix import first_error
from builder.matrix.expand import Expansion, expand
from builder.matrix.load import load_matrix
from builder.matrix.model import Cell, Matrix

DEFAULT_MATRIX = "matrix.yaml"


@dataclass(frozen=True)
class Workspace:
    root: Path
    matrix: Matrix
    expansion: Expansion
    today: dt.date

    @property
    def cells(self) -> tuple[Cell, ...]:
        return self.expansion.cells

    def cell(self, name: str) -> Cell:
        found = self.expansion.find(name)
        if found is not None:
            return found
        why = self.expansion.find_excluded(name)
        if why is not None:
            raise TrainimgError(
                f"cell {name!r} is excluded by group {why.group!r}: "
                f"[{why.reason.code}] {why.reason.text}"
            )
        names = ", ".join(c.name for c in self.cells[:5])
        more = (
            f" (and {len(self.cells) - 5} more; see `trainimg matrix list`)"
            if len(self.cells) > 5
            else ""
        )
        raise TrainimgError(f"no cell named {name!r} in {self.matrix.path}; cells: {names}{more}")

    def select(self, names: list[str]) -> tuple[Cell, ...]:
        return tuple(self.cell(n) for n in names) if names else self.cells


def open_workspace(
    matrix_path: str | Path = DEFAULT_MATRIX, today: dt.date | None = None, *, strict: bool = True
) -> Workspace:
    """Load, expand and (when strict) refuse a matrix whose cells break a rule."""
    path = Path(matrix_path)
    day = today or dt.date.today()
    matrix = load_matrix(path)
    expansion = with_content_hashes(expand(matrix), matrix.project)
    _check_defaults(matrix, expansion)
    if strict:
        err = first_error(matrix, expansion, day)
        if err is not None:
            raise err
    return Workspace(path.resolve().parent, matrix, expansion, day)


def _check_defaults(matrix: Matrix, expansion: Expansion) -> None:
    """project.default_cell (and default_gpu_cell) must name cells the matrix produces."""
    wanted = (
        ("default_cell", matrix.project.default_cell, None),
        ("default_gpu_cell", matrix.project.default_gpu_cell, "cuda"),
    )
    for key, name, accelerator in wanted:
        if name is None:
            continue
        cell = expansion.find(name)
        keypath = f"project.{key}"
        line = matrix.lines.get(keypath)
        if cell is None:
            why = f"{name!r} is not a cell of this matrix (see `trainimg matrix list --all`)"
            raise MatrixError(matrix.path, why, keypath, line)
        if accelerator and cell.accelerator != accelerator:
            why = f"{name!r} is a {cell.accelerator} cell; this key names a {accelerator} cell"
            raise MatrixError(matrix.path, why, keypath, line)
