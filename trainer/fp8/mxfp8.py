"""Can this install run MXFP8 training, and if not, why: read from torchao's package files, so
`trainer info` can say it without importing torchao.

torchao's MXFP8 training lives in `torchao.prototype.moe_training.config` from torchao 0.17
(0.15 and 0.16 do not have it). On CUDA its dim-1 casts run a CUDA extension, `_C_mxfp8`, built
for sm_100 (its SASS; B200/GB200 and the B300's sm_103 run it) and loaded with torchao; torchao
0.18's wheel carries it for CPython 3.10 only (`_C_mxfp8.cpython-310-...so`), so on the images'
Python 3.11/3.12 the op has no CUDA kernel. On the CPU torchao's emulated recipe needs neither.
"""

from __future__ import annotations

import platform
import re
from importlib import metadata
from typing import Final

MODULE: Final = "torchao.prototype.moe_training.config"
MIN_TORCHAO: Final = "0.17"
_MODULE_FILE: Final = "torchao/prototype/moe_training/config.py"
_KERNEL: Final = re.compile(r"^torchao/_C_mxfp8\.(?:cpython-(\d)(\d+)-.*|abi3)\.so$")


def _files() -> list[str] | None:
    try:
        files = metadata.files("torchao")
    except metadata.PackageNotFoundError:
        return None
    return [str(f) for f in files or []]


def module_problem() -> str | None:
    """Why torchao's MXFP8 training module is not there (None when it is)."""
    files = _files()
    if files is None:
        return (
            f"fp8_recipe mxfp8 needs torchao >= {MIN_TORCHAO} ({MODULE}); torchao is not installed"
        )
    if _MODULE_FILE not in files:
        return (
            f"fp8_recipe mxfp8 needs torchao >= {MIN_TORCHAO} ({MODULE}); this is torchao "
            f"{metadata.version('torchao')}, which does not have it"
        )
    return None


def kernel_builds() -> list[str]:
    """The Pythons torchao's `_C_mxfp8` is built for (`abi3`: any)."""
    return [
        "abi3" if m.group(1) is None else f"{m.group(1)}.{m.group(2)}"
        for m in (_KERNEL.match(f) for f in _files() or [])
        if m
    ]


def kernel_problem() -> str | None:
    """Why torchao's MXFP8 CUDA extension will likely not load into this Python (None when a
    build for it is there). A hint: whether the op got its CUDA kernel is checked at run time."""
    builds = kernel_builds()
    this = ".".join(platform.python_version_tuple()[:2])
    if "abi3" in builds or this in builds:
        return None
    tags = ", ".join(f"CPython {b}" for b in builds) or "no Python"
    return (
        f"torchao's MXFP8 CUDA kernels (_C_mxfp8) are built for {tags} in this torchao, not for "
        f"this Python {this}: on a GPU the MXFP8 casts need them (checked at the start of a "
        "run); use a torchao built for this Python, or fp8_recipe tensorwise"
    )
