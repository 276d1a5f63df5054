"""Which torchao arrived in a CUDA cell's wheelhouse: its local build tag and the libcudart.so.N
its extensions NEED must be the cell's CUDA (pip ranks 0.17.0+cu128 of PyTorch's index above
PyPI's 0.17.0 only by luck; PyPI's NEEDs libcudart.so.13)."""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from pathlib import Path

from builder.arches import needed as needed_lib
from builder.build.closure import Wheel
from builder.errors import TrainimgError
from builder.facts import cuda as cuda_rules
from builder.facts import torch_builds
from builder.matrix.model import Cell


def _extension_cudart(path: Path) -> list[tuple[str, int]]:
    """(member, CUDA major) for each extension of a wheel that NEEDs a libcudart.so.N."""
    out = []
    with zipfile.ZipFile(path) as z:
        for member in z.namelist():
            if not member.endswith(".so"):
                continue
            try:
                major = needed_lib.cudart_major(needed_lib.needed(z.read(member)))
            except needed_lib.ElfError:
                continue
            if major is not None:
                out.append((member, major))
    return out


def refuse_foreign_torchao(
    cell: Cell, chosen: Sequence[Wheel], error: type[TrainimgError] = TrainimgError
) -> None:
    """A CUDA cell's torchao must be its CUDA's build: a local tag of another build (+cu130 in a
    cu128 cell), or extensions that NEED another CUDA's runtime (PyPI's plain torchao 0.17.0
    NEEDs libcudart.so.13), would install and then fail to load its kernels. Said before any
    build, naming the library."""
    if cell.cuda is None:
        return
    tag = cuda_rules.cuda_tag(cell.cuda.version)
    for w in chosen:
        if w.name != "torchao":
            continue
        local = w.version.local or ""
        if local.startswith("cu") and local != tag:
            raise error(
                f"cell {cell.name}: the wheelhouse's torchao {w.version} ({w.path.name}) is the "
                f"{local} build, not {tag}: take torchao=={w.version.public}+{tag} from "
                f"{torch_builds.index_for(tag)}"
            )
        for member, major in _extension_cudart(w.path):
            if major != cell.cuda.version.major:
                raise error(
                    f"cell {cell.name}: the wheelhouse's torchao {w.version} ({w.path.name}): "
                    f"{member} NEEDs libcudart.so.{major}, but the cell is CUDA "
                    f"{cell.cuda.version} (libcudart.so.{cell.cuda.version.major}): the "
                    f"wheelhouse resolved a torchao built for CUDA {major}; take "
                    f"torchao=={w.version.public}+{tag} from {torch_builds.index_for(tag)}"
                )
