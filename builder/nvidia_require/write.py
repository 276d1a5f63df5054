"""The NVIDIA_REQUIRE_CUDA value an image carries, written from the facts like NVIDIA's images."""

from __future__ import annotations

from packaging.version import Version

from builder.facts import cuda as cuda_rules


def nvidia_require_cuda(cuda: Version) -> str:
    """The NVIDIA_REQUIRE_CUDA value NVIDIA's own images carry for this CUDA minor."""
    minor = cuda_rules.minor(cuda)
    parts = [f"cuda>={minor}"]
    for branch in cuda_rules.REQUIRE_BRANCH_WINDOWS.get(minor, ()):
        for brand in cuda_rules.REQUIRE_BRANDS:
            parts.append(f"brand={brand},driver>={branch},driver<{branch + 1}")
    return " ".join(parts)
