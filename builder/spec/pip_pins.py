"""A cell's pip pins, as data (pure): what its Containerfile installs, made once.

Render prints them (the Containerfile's comment of the cell's pins) and the wheelhouse resolves
and downloads their closure (builder/build/wheelhouse.py): both read this one list, in this one
order - torch, torchao where the cell's FP8 backend is torchao, then the matrix's
python_packages sorted by their `name==version` text.
"""

from __future__ import annotations

from dataclasses import dataclass

from builder.facts import torch_builds
from builder.matrix.model import Cell
from builder.spec.labels import torchao_version


@dataclass(frozen=True)
class PipPin:
    """One exact pin, as the matrix and the facts spell it (names and versions not normalised:
    the Containerfile shows them as written)."""

    name: str
    version: str

    def __str__(self) -> str:
        return f"{self.name}=={self.version}"


def pip_pins(cell: Cell) -> tuple[PipPin, ...]:
    """Exactly the pins the cell's image pip-installs (their closure fills the wheel groups)."""
    out = [PipPin("torch", torch_builds.pip_pin(cell.torch))]
    ao = torchao_version(cell)
    if ao:
        out.append(PipPin("torchao", ao))
    out += sorted((PipPin(p.name, p.version) for p in cell.python_packages), key=str)
    return tuple(out)
