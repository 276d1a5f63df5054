"""CUDA toolkit facts: minimum driver per release, minor-version and forward compatibility,
the NVIDIA_REQUIRE_CUDA brand windows NVIDIA ships, the supported host compilers, and which
NVIDIA packages its repository keeps in every build."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from packaging.version import Version

from builder.facts import data_files
from builder.facts import drivers as driver_rules
from builder.facts.driver_version import DriverVersion
from builder.facts.sources import (
    CUDA_FORWARD_COMPAT,
    CUDA_MVC,
    NVIDIA_CUDA_IMAGE_12_8_1,
    Source,
)


class UnknownCudaRelease(LookupError):
    """A CUDA version no fact here covers; the message lists the ones that are covered."""


@dataclass(frozen=True)
class CudaRelease:
    version: Version
    min_driver: DriverVersion  # Linux x86_64 "toolkit driver version"
    source: Source


# CUDA release notes, Table 3 (Linux x86_64): data (builder/facts/data/cuda_releases.json, with
# the day it was read), one source per row (unconfirmed where only NVIDIA's repository listing of
# the branch's builds backs it).
_RELEASES_SOURCE = (
    f"{data_files.CUDA_RELEASES_HEADER.source}, read {data_files.CUDA_RELEASES_HEADER.read}"
)
CUDA_RELEASES: dict[str, CudaRelease] = {
    row.version.base_version: CudaRelease(
        row.version, DriverVersion(row.min_driver), Source(_RELEASES_SOURCE, row.confirmed)
    )
    for row in data_files.CUDA_RELEASE_ROWS
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
    13: DriverVersion.branch_start(580),
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
# NVIDIA's 13.2 images name the 535, 570, 580 and 590 windows (issue 30's reading of
# dist/13.2.*/rockylinux9/base/Dockerfile, 2026-12-03); no 13.0 window is recorded here, so a
# 13.0 image carries the `cuda>=13.0` term alone.
REQUIRE_BRANCH_WINDOWS: dict[str, tuple[int, ...]] = {
    "12.8": (470, 535, 550, 560, 565),
    "13.2": (535, 570, 580, 590),
}
REQUIRE_BRANCH_WINDOWS_13_2_SOURCE = Source(
    "https://gitlab.com/nvidia/container-images/cuda (dist/13.2.*/rockylinux9/base/Dockerfile)",
    confirmed=False,
)


_CUDA13_HOST_COMPILERS = Source(
    "https://docs.nvidia.com/cuda/cuda-installation-guide-linux/ (13.0-13.2, host compiler "
    "support: GCC up to 15.x; read 2026-12-03)",
    confirmed=False,
)


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
    # nvcc 13.x: GCC up to 15 as the host compiler (13.0 added GCC 15; EL9's gcc 11, Debian
    # 12's gcc 12 and EL10's gcc 14 are inside). The floor is not read here: 6, as 12.8's.
    **{m: HostCompilerRange(6, 15, _CUDA13_HOST_COMPILERS) for m in ("13.0", "13.1", "13.2")},
}


def minor(cuda: Version) -> str:
    return f"{cuda.major}.{cuda.minor}"


# The CUDA version each driver branch reports lives with the branch facts (facts/drivers.py).
driver_cuda_version = driver_rules.driver_cuda_version


# Which NVIDIA packages its CUDA repositories keep in every build, so an exact pin keeps
# resolving: the toolkit's component packages, cuda-<component>-<major>-<minor> at a component
# version (cuda-cudart-12-8 12.8.57-1 of 12.8.0 beside 12.8.90-1 of 12.8.1). NVIDIA's own images
# pin them exactly (NV_CUDA_CUDART_VERSION=12.8.90-1 in dist/12.8.1/rockylinux9/base) and
# rebuild old releases from the live repository. The driver-branch packages are not among them:
# cuda-compat-<major>-<minor> follows every driver release of its branch (570.124.06 ...
# 570.211.01), which build a repository or a site's mirror holds differs (the rhel9 build of
# 570.211.01 was not confirmed), and NVIDIA's images install it unpinned - so it is pinned by
# its branch series ('570.*', checked after install) and the lock records the build.
# Read 2026-12-01.
EXACT_PIN_KEPT = re.compile(r"cuda-(?!compat-)[a-z0-9]+(?:-[a-z]+)*-[0-9]+-[0-9]+")
EXACT_PIN_KEPT_SOURCE = Source(
    f"{NVIDIA_CUDA_IMAGE_12_8_1.ref}; https://developer.download.nvidia.com/compute/cuda/repos/"
    "rhel9/x86_64/ (the repository index, read 2026-12-01)",
    confirmed=False,
)
BRANCH_SERIES_SOURCE = NVIDIA_CUDA_IMAGE_12_8_1  # installs cuda-compat-12-8 unpinned


def kept_in_every_build(package: str) -> bool:
    """Whether NVIDIA's repository keeps every build of `package` (EXACT_PIN_KEPT)."""
    return EXACT_PIN_KEPT.fullmatch(package) is not None


# NVIDIA's CUDA repository directory for each EL family: rhel9 for EL9, rhel10 for EL10 (NVIDIA
# publishes both, and its driver installation guide lists RHEL 10 / Rocky Linux 10). A cell
# whose family points dnf at another family's directory gets packages built for another glibc.
NVIDIA_REPO_HOST = "https://developer.download.nvidia.com/compute/cuda/repos/"
CUDA_REPO_DIRS: dict[str, str] = {"el9": "rhel9", "el10": "rhel10"}
CUDA_REPO_DIRS_SOURCE = Source(
    "https://developer.download.nvidia.com/compute/cuda/repos/rhel10/x86_64/ and .../rhel9/"
    "x86_64/ (the repository indexes); "
    "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/ (RHEL 10, Rocky "
    "Linux 10); read 2026-12-03"
)


def wrong_repo_dir(family: str, url: str) -> str | None:
    """The directory `url` should name, where it is NVIDIA's own repository of another family
    (None if it fits, or is a mirror this cannot judge)."""
    want = CUDA_REPO_DIRS.get(family)
    if want is None or not url.startswith(NVIDIA_REPO_HOST):
        return None
    return None if url[len(NVIDIA_REPO_HOST) :].split("/")[0] == want else want
