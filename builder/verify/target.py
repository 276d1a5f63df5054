"""What the user named: an image reference, or a matrix cell whose image is <repository>:<cell>."""

from __future__ import annotations

from pathlib import Path

from builder.errors import TrainimgError
from builder.matrix.model import Cell
from builder.workspace import Workspace, open_workspace


def load_workspace(matrix: str | None) -> Workspace | None:
    """The project's matrix when there is one here (verify also works without it)."""
    if matrix is None or not Path(matrix).exists():
        return None
    try:
        return open_workspace(matrix, strict=False)
    except TrainimgError:
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
    if not target or any(c.isspace() for c in target):
        raise TrainimgError(f"{target!r} is neither a file, a matrix cell nor an image reference")
    return target
