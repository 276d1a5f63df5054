"""PyTorch wheel facts: which versions have cu128 builds, their compiled arch lists, the Python
tags they ship, and the torchao release each one pairs with."""

from __future__ import annotations

from packaging.version import Version

from builder.facts import data_files
from builder.facts.sources import TORCH_BUILD_CUDA_SH, Source

_ARCH_2_8 = ("sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")

# Compiled SASS per torch minor for cu128 builds (no trailing PTX): ARCH_LIST_SOURCES.
CU128_ARCH_LIST: dict[str, tuple[str, ...]] = {
    "2.7": ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"),
    "2.8": _ARCH_2_8,
    "2.9": _ARCH_2_8,
    "2.10": _ARCH_2_8,
    "2.11": ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"),
}
ARCH_LIST_SOURCES: dict[str, Source] = {
    "2.7": Source("https://github.com/moi90/pytorch_compute_capabilities table.md"),
    "2.8": Source(f"{TORCH_BUILD_CUDA_SH.ref}; https://github.com/pytorch/pytorch/issues/157517"),
    "2.9": Source("https://github.com/pytorch/pytorch/issues/182250"),
    "2.10": Source("https://github.com/pytorch/pytorch/issues/182250 (2.10.0+cu128 output)"),
    "2.11": Source(
        "https://github.com/pytorch/pytorch/issues/172352; "
        "https://github.com/pytorch/pytorch/pull/172598"
    ),
}
# CUDA 13 builds, per (build tag, torch minor): read from PyPI's own wheels with the project's
# fatbin reader (`trainimg arches libtorch_cuda.so`, 2026-12-03): torch-2.13.0, 2.14.1 and
# 2.15.0 cp312 manylinux_2_28_x86_64 (sha256 796633c4cdf0fe2c..., 23011fe29a99b591...,
# 6d8c86f4e33a9f12...) carry SASS
# sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 in every kernel module and no PTX. A minor not listed
# here has an unknown arch list (None), which every message and label says as "unknown".
_ARCH_CU13 = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")
CUDA13_ARCH_LIST: dict[tuple[str, str], tuple[str, ...]] = {
    ("cu130", "2.13"): _ARCH_CU13,
    ("cu130", "2.14"): _ARCH_CU13,
    ("cu132", "2.15"): _ARCH_CU13,
}
CUDA13_ARCH_SOURCE = Source(
    "https://pypi.org/simple/torch/ torch-2.13.0, 2.14.1 and 2.15.0 cp312 manylinux_2_28_x86_64 "
    "wheels, libtorch_cuda.so scanned by builder/arches/fatbin.py on 2026-12-03"
)
# cu128 wheels exist for 2.7.x through 2.11.x; 2.12 and later publish none (CU128_SOURCE).
CU128_TORCH = ("2.7", "2.8", "2.9", "2.10", "2.11")
CU128_SOURCE = Source(
    "https://download.pytorch.org/whl/cu128; https://github.com/pytorch/pytorch/issues/178665"
)
CU128_INDEX = "https://download.pytorch.org/whl/cu128"

# The CUDA build that PyPI's plain `torch==X.Y.Z` manylinux x86_64 wheel is, and the CPython
# tags of its wheels, per release: data (builder/facts/data/torch_pypi.json, with the day it was
# read), rewritten by `trainimg facts refresh --write`. A cell built from PyPI alone (an
# air-gapped Debian cell) can be cuXYZ only where this says cuXYZ. Per torch minor, the newest
# release of the minor speaks for it.
PYPI_CUDA_BUILD: dict[str, str] = {
    f"{r.version.major}.{r.version.minor}": r.cuda for r in data_files.TORCH_RELEASES if r.cuda
}
PYPI_CUDA_BUILD_SOURCE = Source(
    f"{data_files.TORCH_PYPI.source}, read {data_files.TORCH_PYPI.read} "
    "(builder/facts/data/torch_pypi.json)"
)
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# PyTorch's own index of a CUDA build's wheels (+cu128, +cu130, ...).
TORCH_INDEX = "https://download.pytorch.org/whl/{tag}"

# CPython tags of the manylinux x86_64 wheels on PyPI, per torch minor.
PYTHON_TAGS: dict[str, tuple[str, ...]] = {
    f"{r.version.major}.{r.version.minor}": r.python for r in data_files.TORCH_RELEASES
}
PYTHON_TAGS_SOURCE = PYPI_CUDA_BUILD_SOURCE

# Wheels are manylinux_2_28: glibc >= 2.28 on the image's OS (PEP 600).
MANYLINUX_GLIBC = Version("2.28")
MANYLINUX_SOURCE = Source("https://peps.python.org/pep-0600/; torch wheel file names")

# torchao below 0.17 loads its C++ extensions only against the exact torch it was built with;
# 0.17.0 and later are ABI-stable and need torch >= 2.11. 0.18.0 ran on torch 2.13.0+cpu here.
TORCHAO_FOR_TORCH: dict[str, str] = {
    "2.8.0": "0.13.0",
    "2.9.0": "0.14.1",
    "2.9.1": "0.15.0",
    "2.10.0": "0.16.0",
    "2.11.0": "0.17.0",
}
# ABI-stable releases, newest first: (minimum torch, torchao release).
TORCHAO_ABI_STABLE: tuple[tuple[Version, str], ...] = (
    (Version("2.12"), "0.18.0"),
    (Version("2.11"), "0.17.0"),
)
TORCHAO_SOURCE = Source(
    "https://github.com/pytorch/ao/issues/2919; https://github.com/pytorch/ao/pull/4154; "
    "https://github.com/pytorch/ao/releases/tag/v0.18.0; 0.18.0 on 2.13.0+cpu: "
    "builder/verify/suite/test_3_training.py (test_train_fp8_fwd in the debian12-cpu image)"
)
# Transformer Engine compiles its PyTorch extension against the CUDA toolkit (nvcc, headers) at
# install time: only a cuda devel image can carry it.
TRANSFORMER_ENGINE_SOURCE = Source(
    "https://docs.nvidia.com/deeplearning/transformer-engine/user-guide/installation.html",
    confirmed=False,
)


def torch_minor(torch: Version) -> str:
    return f"{torch.major}.{torch.minor}"


def arch_list(torch: Version, accelerator: str) -> tuple[str, ...] | None:
    """The SASS arches a torch build was compiled for: () for CPU builds, None when unknown."""
    if accelerator == "cpu":
        return ()
    build = torch.local or pypi_cuda_build(torch) or "cu128"
    if build == "cu128":
        return CU128_ARCH_LIST.get(torch_minor(torch))
    return CUDA13_ARCH_LIST.get((build, torch_minor(torch)))


def arch_list_source(torch: Version) -> Source | None:
    """Where a torch build's arch list comes from (None when no fact covers it)."""
    build = torch.local or pypi_cuda_build(torch) or "cu128"
    if build == "cu128":
        return ARCH_LIST_SOURCES.get(torch_minor(torch))
    return CUDA13_ARCH_SOURCE if (build, torch_minor(torch)) in CUDA13_ARCH_LIST else None


def pypi_cuda_build(torch: Version) -> str | None:
    """The CUDA build tag of PyPI's plain torch wheel ("cu128"), None when no fact covers it."""
    return PYPI_CUDA_BUILD.get(torch_minor(torch))


def pip_pin(torch: Version) -> str:
    """The version to pin: the plain PyPI version when PyPI's wheel is that very build (so a
    PyPI-only wheelhouse can hold it), else the local-tagged build of PyTorch's own index."""
    local = torch.local or ""
    if local.startswith("cu") and pypi_cuda_build(torch) == local:
        return torch.public
    return str(torch)


def has_cu128(torch: Version) -> bool:
    return torch_minor(torch) in CU128_TORCH


def builds_of(tag: str) -> tuple[str, ...]:
    """The torch minors published as a CUDA build: cu128 on PyTorch's index (CU128_TORCH), a
    CUDA 13 build where PyPI's plain wheel is that build (torch_pypi.json)."""
    if tag == "cu128":
        return CU128_TORCH
    return tuple(dict.fromkeys(m for m, b in PYPI_CUDA_BUILD.items() if b == tag))


def known_builds() -> frozenset[str]:
    return frozenset({"cu128", *PYPI_CUDA_BUILD.values()})


def has_build(torch: Version, tag: str) -> bool:
    return torch_minor(torch) in builds_of(tag)


def build_source(tag: str) -> Source:
    return CU128_SOURCE if tag == "cu128" else PYPI_CUDA_BUILD_SOURCE


def index_for(local: str) -> str:
    """PyTorch's own index of a local build (+cpu, +cu128, +cu130)."""
    return CPU_INDEX if local == "cpu" else TORCH_INDEX.format(tag=local)


def python_tags(torch: Version) -> tuple[str, ...] | None:
    return PYTHON_TAGS.get(torch_minor(torch))


def torchao_for(torch: Version) -> str | None:
    """The torchao release to pair with a torch release, or None when no fact covers it."""
    public = Version(Version(torch.public).base_version)
    if public.base_version in TORCHAO_FOR_TORCH:
        return TORCHAO_FOR_TORCH[public.base_version]
    for floor, release in TORCHAO_ABI_STABLE:
        if public >= floor:
            return release
    return None
