"""How a cell's wheels are split into install layers that change at different rates.

Each group is installed by its own `RUN` into its own prefix and copied into the final image by
its own `COPY`, slowest-changing first: the CUDA user-space wheels, then torch and triton, then
everything else. A new pin of a small package rebuilds only the last group's layers.

The CUDA wheels (4.57 GB installed for cu128) are split by library, so one changed nvidia-*
wheel re-pushes its own layer, not all of them: cuDNN and cuBLAS (~1 GB each) alone, NCCL with
NVSHMEM, the sparse libraries, the solver/FFT/RAND set, and the small rest (runtime, NVRTC,
CUPTI, nvJitLink, NVTX, cuFile). Builds are reproducible (builder/build/source_date.py), so a group
rebuilt with unchanged wheels gives the same layer digest, which a registry already holds.
"""

from __future__ import annotations

from packaging.utils import NormalizedName

from builder.matrix.model import Cell

CUDA = "cuda"
TORCH = "torch"
REST = "rest"
TORCH_NAMES = frozenset({"torch", "triton", "pytorch-triton"})
# CUDA sub-groups, in install order, each with the nvidia-* name prefixes it takes; what none
# takes goes to CUDA (installed first: the runtime, NVRTC, CUPTI, nvJitLink, NVTX, cuFile).
CUDA_SPLIT = (
    ("cuda-cudnn", ("nvidia-cudnn-",)),
    ("cuda-cublas", ("nvidia-cublas-",)),
    ("cuda-nccl", ("nvidia-nccl-", "nvidia-nvshmem-")),
    ("cuda-sparse", ("nvidia-cusparse-", "nvidia-cusparselt-")),
    ("cuda-solver", ("nvidia-cusolver-", "nvidia-cufft-", "nvidia-curand-")),
)

# Paths (relative to site-packages) a training image never loads, removed in the venv stage so
# they never reach the final image. torch: protoc (a build tool; torch_shm_manager next to it
# is used at run time and stays), its C++ test programs and test fixtures in torch/bin (~40 MB)
# and the TorchBind test library, and test trees older wheels shipped. torch/testing (torch
# imports it) and torch/include (Inductor's C++ and extensions compile against it) stay.
# Triton (cu128): its AMD backend and the static archives of its bundled CUPTI. CUDA: NVRTC's
# `.alt` builds (torch loads libnvrtc.so.12). The rest: torchao's own test suite (a top-level
# `test` package). Besides these, every `tests` directory of the rest group's packages goes
# (sympy, numpy, networkx, ...: ~65 MB).
TRIM = {
    CUDA: (
        "nvidia/cuda_nvrtc/lib/libnvrtc.alt.so*",
        "nvidia/cuda_nvrtc/lib/libnvrtc-builtins.alt.so*",
    ),
    TORCH: (
        "torch/bin/protoc",
        "torch/bin/protoc-*",
        "torch/bin/*Test",
        "torch/bin/test_*",
        "torch/bin/*.pt",
        "torch/bin/*.ptl",
        "torch/lib/libtorchbind_test.so",
        "torch/test",
        "caffe2/python/test",
        "triton/backends/amd",
        "triton/backends/nvidia/lib/cupti/*.a",
    ),
    REST: ("test",),
}
# A CPU cell cannot load torchao's CUDA kernels (the sm_90a CUTLASS and sm_100 MXFP8 libraries:
# "Failed to load" on every import, 13.5 MB): they go too.
CPU_TRIM = {REST: ("torchao/_C_cutlass_*.so", "torchao/_C_mxfp8*.so")}
TEST_TREES = (REST,)  # groups whose packages' `tests` directories are removed


def groups(cell: Cell) -> tuple[str, ...]:
    """The groups of `cell`, in install order."""
    if cell.cuda is None:
        return (TORCH, REST)
    return (CUDA, *(name for name, _ in CUDA_SPLIT), TORCH, REST)


def group_of(name: NormalizedName, cell: Cell) -> str:
    if cell.cuda is not None and name.startswith("nvidia-"):
        for group, prefixes in CUDA_SPLIT:
            if name.startswith(prefixes):
                return group
        return CUDA
    if name in TORCH_NAMES:
        return TORCH
    return REST


def trim(cell: Cell) -> dict[str, tuple[str, ...]]:
    """group -> paths under its prefix removed after the install (shell globs)."""
    site = f"lib/python{cell.python}/site-packages"
    extra = CPU_TRIM if cell.cuda is None else {}
    return {
        group: tuple(f"{site}/{p}" for p in (*paths, *extra.get(group, ())))
        for group, paths in TRIM.items()
        if group in groups(cell)
    }
