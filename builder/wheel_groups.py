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

# Paths (relative to site-packages) a training image never needs, removed in the venv stage so
# they never reach the final image. torch: protoc (a build tool; torch_shm_manager next to it
# is used at run time and stays), and test trees older wheels shipped. torch/testing (torch
# imports it) and torch/include (Inductor's C++ and extensions compile against it) stay.
# The rest: torchao's own test suite (a top-level `test` package). Besides these, every
# `tests` directory of the rest group's packages goes (sympy, numpy, networkx, ...: ~65 MB).
TRIM = {
    TORCH: ("torch/bin/protoc", "torch/bin/protoc-*", "torch/test", "caffe2/python/test"),
    REST: ("test",),
}
TEST_TREES = (REST,)  # groups whose packages' `tests` directories are removed


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
    return {group: tuple(f"{site}/{p}" for p in paths) for group, paths in TRIM.items()}
