"""How a cell's wheels are split into install layers that change at different rates.

Each group is installed by its own `RUN` into its own prefix and copied into the final image by
its own `COPY`, slowest-changing first: the CUDA user-space wheels (nvidia-*, ~3 GB for cu128),
then torch and triton, then everything else. A new pin of a small package rebuilds only the last
group's layers; the 4 GB above it come from the layer cache.
"""

from __future__ import annotations

from packaging.utils import NormalizedName

from builder.matrix.model import Cell

CUDA = "cuda"
TORCH = "torch"
REST = "rest"
TORCH_NAMES = frozenset({"torch", "triton", "pytorch-triton"})

# Paths (relative to site-packages) a training image never needs, removed before the copy into
# the final image: torch's own test tree and C++ test binaries. torch/testing (imported by torch
# itself) and torch/include (Inductor's C++ code and extensions compile against it) stay.
TORCH_TRIM = ("torch/test", "torch/bin/test_*", "caffe2/python/test")


def groups(cell: Cell) -> tuple[str, ...]:
    """The groups of `cell`, in install order."""
    return (CUDA, TORCH, REST) if cell.cuda is not None else (TORCH, REST)


def group_of(name: NormalizedName, cell: Cell) -> str:
    if cell.cuda is not None and name.startswith("nvidia-"):
        return CUDA
    if name in TORCH_NAMES:
        return TORCH
    return REST


def trim(cell: Cell) -> dict[str, tuple[str, ...]]:
    """group -> paths under its prefix removed after the install."""
    site = f"lib/python{cell.python}/site-packages"
    return {TORCH: tuple(f"{site}/{p}" for p in TORCH_TRIM)}
