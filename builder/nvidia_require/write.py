"""The NVIDIA_REQUIRE_CUDA value an image carries, written from the facts like NVIDIA's images."""

from __future__ import annotations

from packaging.version import Version

from builder.facts import cuda as cuda_rules


def nvidia_require_cuda(cuda: Version, *, forward_compat: bool = True) -> str:
    """The NVIDIA_REQUIRE_CUDA value for this CUDA minor: `cuda>=MAJOR.MINOR`, then NVIDIA's
    brand windows for the older branches forward compatibility serves. The windows promise
    cuda-compat: an image that ships none (`forward_compat=False`: PyPI's CUDA wheels, a toolkit
    install without it) carries the `cuda>=` term alone, so no host is admitted through a path
    the image does not have."""
    minor = cuda_rules.minor(cuda)
    parts = [f"cuda>={minor}"]
    windows = cuda_rules.REQUIRE_BRANCH_WINDOWS.get(minor, ()) if forward_compat else ()
    for branch in windows:
        for brand in cuda_rules.REQUIRE_BRANDS:
            parts.append(f"brand={brand},driver>={branch},driver<{branch + 1}")
    return " ".join(parts)
