"""What the user named: an image reference, or a matrix cell whose image is <repository>:<cell>."""

from __future__ import annotations

from pathlib import Path

from builder.errors import TrainimgError
from builder.matrix.model import Cell
from builder.workspace import (
    DEFAULT_MATRIX,
    Workspace,
    closest,
    find_matrix,
    open_workspace,
)


def load_workspace(matrix: str | None) -> Workspace | None:
    """The project's matrix when there is one here (verify also works without it). A matrix
    named on purpose (--matrix, $TRAINIMG_MATRIX) must exist and load: otherwise a cell name
    would silently be taken for an image reference."""
    if matrix is None:
        return None
    explicit = matrix != DEFAULT_MATRIX
    path = Path(matrix) if explicit else find_matrix()
    if path is None or not path.exists():
        if explicit:
            raise TrainimgError(f"--matrix {matrix}: no such file")
        return None
    try:
        return open_workspace(path, strict=False)
    except TrainimgError:
        if explicit:
            raise
        return None


def find_cell(ws: Workspace | None, name: str) -> Cell | None:
    if ws is None or not name:
        return None
    return ws.expansion.find(name)


def resolve_image(target: str, matrix: str | None) -> str:
    """A cell name becomes `<project.repository>:<cell>`; anything else is taken as a reference."""
    ws = load_workspace(matrix)
    cell = find_cell(ws, target)
    if ws is not None and cell is not None:
        return f"{ws.matrix.project.repository}:{cell.name}"
    if ws is not None and not any(c in target for c in "/:@"):
        near = closest(target, [c.name for c in ws.cells])
        if near:  # a typo of a cell name, not an image of that name
            raise TrainimgError(
                f"no cell named {target!r} in {ws.matrix.path}; did you mean "
                f"{' or '.join(near)}? (an image: name it with its tag, e.g. {target}:latest)"
            )
    if not target or any(c.isspace() for c in target):
        raise TrainimgError(f"{target!r} is neither a file, a matrix cell nor an image reference")
    return target
