"""CUDA toolkit facts: minimum driver per release, minor-version and forward compatibility,
the NVIDIA_REQUIRE_CUDA brand windows NVIDIA ships, and the supported host compilers."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from packaging.version import Version

from builder.facts import drivers as driver_rules
from builder.facts.driver_version import DriverVersion
from builder.facts.sources import (
    CUDA_FORWARD_COMPAT,
    CUDA_MVC,
    CUDA_RELEASE_NOTES,
    Source,
)


class UnknownCudaRelease(LookupError):
    """A CUDA version no fact here covers; the message lists the ones that are covered."""


@dataclass(frozen=True)
class CudaRelease:
    version: Version
    min_driver: DriverVersion  # Linux x86_64 "toolkit driver version"
    source: Source = CUDA_RELEASE_NOTES


# CUDA release notes, Table 3 (Linux x86_64): CUDA_RELEASE_NOTES.
CUDA_RELEASES: dict[str, CudaRelease] = {
    r.version.base_version: r
    for r in (
        CudaRelease(Version("12.0.0"), DriverVersion("525.60.13")),
        CudaRelease(Version("12.6.0"), DriverVersion("560.28.03")),
        CudaRelease(Version("12.6.3"), DriverVersion("560.35.05")),
        CudaRelease(Version("12.8.0"), DriverVersion("570.26")),
        CudaRelease(Version("12.8.1"), DriverVersion("570.124.06")),
        CudaRelease(Version("12.9.0"), DriverVersion("575.51.03")),
        CudaRelease(Version("12.9.1"), DriverVersion("575.57.08")),
        CudaRelease(Version("13.0.0"), DriverVersion("580.65.06")),
    )
}


def release(cuda: Version) -> CudaRelease:
    """The release facts for an exact CUDA version (12.8 means 12.8.0, the GA)."""
    key = Version(".".join(str(p) for p in (*cuda.release, 0, 0)[:3])).base_version
    try:
        return CUDA_RELEASES[key]
    except KeyError:
        known = ", ".join(CUDA_RELEASES)
        raise UnknownCudaRelease(
            f"CUDA {cuda} is not a release the rules know (known: {known})"
        ) from None


def cuda_tag(cuda: Version) -> str:
    """PyTorch's wheel tag for a CUDA version: 12.8.1 -> cu128."""
    return f"cu{cuda.major}{cuda.minor}"


# Minor-version compatibility: an application built with CUDA <major>.x runs on a driver at or
# above this floor, with a limited feature set (no PTX JIT of newer PTX, no newer-driver APIs).
# https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html
MVC_FLOOR: dict[int, DriverVersion] = {
    11: DriverVersion("450.80.02"),
    12: DriverVersion("525.60.13"),
    13: DriverVersion("580"),
}
MVC_SOURCE = CUDA_MVC
MVC_LIMITS = (
    "no PTX JIT of PTX newer than the driver (cudaErrorUnsupportedPtxVersion 222: "
    "torch.compile/Triton kernels fail) and no APIs that need the newer driver "
    "(cudaErrorCallRequiresNewerDriver)"
)

# Forward compatibility through cuda-compat-<major>-<minor>: data center GPUs only (GeForce gets
# error 804), and only on the kernel-mode branches NVIDIA's matrix lists (CUDA_FORWARD_COMPAT).
FORWARD_COMPAT_BRANCHES: dict[str, tuple[int, ...]] = {"12.8": (535, 550)}
FORWARD_COMPAT_SOURCE = CUDA_FORWARD_COMPAT
# The package that carries the forward-compatibility libraries (libcuda.so.* in
# /usr/local/cuda-<major>.<minor>/compat): an image without it has no forward-compatibility
# path, whatever its NVIDIA_REQUIRE_CUDA says; on an older driver it runs through minor-version
# compatibility or not at all. PyPI's nvidia-*-cu12 wheels carry no libcuda.
COMPAT_PACKAGE_PREFIX = "cuda-compat-"
COMPAT_LIB_GLOB = "/usr/local/cuda*/compat/libcuda.so.*"


class CudaSource(StrEnum):
    """Where an image's CUDA user-space comes from: what decides its path on an older driver."""

    COMPAT = "toolkit+cuda-compat"  # NVIDIA's repository, with cuda-compat: forward compatibility
    TOOLKIT = "toolkit"  # NVIDIA's repository, without cuda-compat: minor-version compatibility
    PYPI = "pypi"  # PyPI's nvidia-*-cu12 wheels (no libcuda): minor-version compatibility
    UNKNOWN = "unknown"  # a foreign image that does not say

    @property
    def ships_compat(self) -> bool:
        return self is CudaSource.COMPAT


# The brand windows NVIDIA writes into NVIDIA_REQUIRE_CUDA of its 12.8.1 images, in its order:
# no "geforce" (nor "titan") term (NVIDIA_CUDA_IMAGE_12_8_1).
REQUIRE_BRANDS: tuple[str, ...] = (
    "unknown",
    "grid",
    "tesla",
    "nvidia",
    "quadro",
    "quadrortx",
    "nvidiartx",
    "vapps",
    "vpc",
    "vcs",
    "vws",
    "cloudgaming",
)
# The driver branches those brand windows name, per CUDA minor (the same image).
REQUIRE_BRANCH_WINDOWS: dict[str, tuple[int, ...]] = {"12.8": (470, 535, 550, 560, 565)}


@dataclass(frozen=True)
class HostCompilerRange:
    gcc_min: int
    gcc_max: int  # inclusive
    source: Source


# nvcc 12.8's host-compiler window. conda's cuda-nvcc-dev_linux-64 12.8.93 constrains
# gcc_impl_linux-64 >=6,<15.0a0; NVIDIA's install guide lists GCC 11 on RHEL 9 (D).
HOST_COMPILERS: dict[str, HostCompilerRange] = {
    "12.8": HostCompilerRange(
        6,
        14,
        Source(
            "https://anaconda.org/main/cuda-nvcc-dev_linux-64 (12.8.93 constrains "
            "gcc_impl_linux-64 >=6,<15.0a0); https://docs.nvidia.com/cuda/cuda-installation-guide-linux/"
        ),
    ),
}


def minor(cuda: Version) -> str:
    return f"{cuda.major}.{cuda.minor}"


# The CUDA version each driver branch reports lives with the branch facts (facts/drivers.py).
driver_cuda_version = driver_rules.driver_cuda_version
