"""How each CUDA library picks its kernels, which decides what a fatbin scan must show for a GPU.

UNIFORM: the library is compiled with one arch list for every translation unit (PyTorch's
TORCH_CUDA_ARCH_LIST for libtorch_cuda*/libc10_cuda, most extensions, Triton's runtime): a kernel
module without code for the GPU is a kernel that fails there, so every module must carry SASS for
it (or PTX the driver can JIT).
PER_ARCH: the library ships separate kernel sets per architecture and chooses among them at run
time for the device it runs on (cuBLAS/cuBLASLt heuristics, cuDNN engines, cuFFT plans, ...):
modules built for other architectures are never loaded there. It runs on the GPU when its
dispatch set holds code for it: at least one module with SASS for the GPU (or PTX it can JIT).
Measured on the real cu128 wheels (nvidia-cublas-cu12 12.8.4.1: 1,555 of cuBLASLt's 2,918
modules carry no sm_100 code, and NVIDIA's 12.8 release notes say cuBLAS supports Blackwell).
OPAQUE: the library keeps its kernels outside the `.nv_fatbin` section the reader lists (cuFFT
11.3.3.83: one sm_52 helper module in .nv_fatbin): the scan cannot judge it, so its verdict is
what NVIDIA documents for the release, said as such ("documented"), never "scanned".
OPTIONAL: kernels no training step of the bundled trainer calls (torchao's own CUDA ops: FP8
training goes through torch._scaled_mm and Inductor): judged and shown, but they never decide
whether the image runs on a GPU.
A library not listed is judged UNIFORM: the stricter rule, never a false "runs".
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from builder.facts.sources import CUDA_RELEASE_NOTES, Source

UNIFORM = "uniform"
PER_ARCH = "per-arch"
OPAQUE = "opaque"
OPTIONAL = "optional"

CUDNN_SUPPORT = Source(
    "https://docs.nvidia.com/deeplearning/cudnn/backend/latest/reference/support-matrix.html "
    "(cuDNN 9.x: per-architecture engines, compute capability 10.0 supported from 9.7)"
)
CUSPARSELT_NOTES = Source(
    "https://docs.nvidia.com/cuda/cusparselt/release_notes.html "
    "(0.7.0: Blackwell sm_100/sm_120 support)"
)
CUBLAS_DOCS = Source(
    "https://docs.nvidia.com/cuda/cublas/index.html#cublasltmatmulalgogetheuristic "
    "(cuBLASLt chooses among per-architecture kernels for the current device); "
    f"{CUDA_RELEASE_NOTES.ref}: cuBLAS 12.8 supports Blackwell"
)
TORCH_ARCH_LIST = Source(
    "https://github.com/pytorch/pytorch/blob/main/.ci/manywheel/build_cuda.sh "
    "(one TORCH_CUDA_ARCH_LIST for the whole build)"
)


TORCHAO_FP8 = Source(
    "https://github.com/pytorch/ao/tree/main/torchao/float8 (float8 training: torch._scaled_mm "
    "under torch.compile, no torchao/_C kernels)"
)
# Compute capability majors NVIDIA documents for the CUDA 12.8 math libraries (Maxwell through
# Blackwell; CUDA 12.8 release notes).
CUDA_12_8_MAJORS = (5, 6, 7, 8, 9, 10, 12)


@dataclass(frozen=True)
class Dispatch:
    pattern: str  # fnmatch pattern on the library's path
    kind: str
    source: Source
    documented: tuple[int, ...] = ()  # OPAQUE: compute capability majors the vendor documents


DISPATCH_RULES: tuple[Dispatch, ...] = (
    Dispatch("*/libcublasLt.so*", PER_ARCH, CUBLAS_DOCS),
    Dispatch("*/libcublas.so*", PER_ARCH, CUBLAS_DOCS),
    Dispatch("*/libcudnn*", PER_ARCH, CUDNN_SUPPORT),
    Dispatch("*/libcufft*", OPAQUE, CUDA_RELEASE_NOTES, CUDA_12_8_MAJORS),
    Dispatch("*/libcusparseLt*", PER_ARCH, CUSPARSELT_NOTES),
    Dispatch("*/libcusparse.so*", PER_ARCH, CUDA_RELEASE_NOTES),
    Dispatch("*/libcusolver*", PER_ARCH, CUDA_RELEASE_NOTES),
    Dispatch("*/libtorch_cuda*", UNIFORM, TORCH_ARCH_LIST),
    Dispatch("*/libc10_cuda*", UNIFORM, TORCH_ARCH_LIST),
    Dispatch("*/torchao/_C*", OPTIONAL, TORCHAO_FP8),
)
DEFAULT = Dispatch("*", UNIFORM, Source("builder/facts/kernel_dispatch.py (the stricter rule)"))


def rule_for(path: str) -> Dispatch:
    """The dispatch rule of the library at `path`."""
    return next((r for r in DISPATCH_RULES if fnmatch.fnmatchcase(path, r.pattern)), DEFAULT)
