"""Where NVIDIA's CUDA wheels put their libraries and headers under site-packages/nvidia, per
CUDA major: a devel image's CPATH and link names (builder.spec.labels) point there."""

from __future__ import annotations

from builder.facts.sources import Source

# CUDA 12's component wheels (nvidia-cublas-cu12, nvidia-cuda-runtime-cu12, ...) each install
# into their own nvidia/<component>/{lib,include}. CUDA 13's (cuda-toolkit 13.x's nvidia-cublas,
# nvidia-cuda-runtime, nvidia-cuda-nvrtc, ...) all install into one nvidia/cu13/{lib,include,bin}
# directory; the libraries released apart from the toolkit (NCCL, cuDNN, cuSPARSELt, NVSHMEM:
# their -cu13 wheels) keep their own nvidia/<name>/ directory, as for CUDA 12.
SHARED_DIR = {13: "cu13"}
OWN_DIR = frozenset({"nccl", "cudnn", "cusparselt", "nvshmem"})
SOURCE = Source(
    "https://pypi.org/project/nvidia-cuda-cuobjdump/13.2.51/ (the wheel unpacks to "
    "nvidia/cu13/bin/cuobjdump: read 2026-12-04 from the copy trainimg verify caches) and "
    "https://pypi.org/project/nvidia-nccl-cu13/ (nvidia/nccl/lib); the other cu13 paths "
    "follow cuda-toolkit 13's one-directory layout, not read file by file here",
    confirmed=False,
)


def wheel_dir(cuda_major: int, name: str) -> str:
    """The directory under site-packages/nvidia that holds wheel `name`'s lib/ and include/
    for a CUDA major: `name` itself, or the major's shared directory (cu13)."""
    shared = SHARED_DIR.get(cuda_major)
    return name if shared is None or name in OWN_DIR else shared
