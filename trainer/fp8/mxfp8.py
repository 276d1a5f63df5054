"""Can this install run MXFP8 training, and if not, why: read from torchao's package files, so
`trainer info` can say it without importing torchao.

torchao's MXFP8 training lives in `torchao.prototype.moe_training.config` from torchao 0.17
(0.15 and 0.16 do not have it). On CUDA its dim-1 casts run a CUDA extension, `_C_mxfp8`, built
for sm_100 (its SASS; B200/GB200 and the B300's sm_103 run it) and loaded with torchao through
torch.ops.load_library. Its file name carries a `cpython-310` tag, but it is no Python module
(no PyInit): what decides whether it loads is the CUDA runtime it links. torchao 0.18's PyPI
wheel links libcudart.so.13 (read from its ELF DT_NEEDED), so next to a cu128 torch it does not
load and the op has no CUDA kernel. On the CPU torchao's emulated recipe needs neither.
"""

from __future__ import annotations

import re
import struct
from importlib import metadata
from pathlib import Path
from typing import Final

import torch

from trainer.fp8 import elf_needed

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


def kernel_files() -> list[Path]:
    """torchao's `_C_mxfp8` CUDA extension files, where they are on disk."""
    try:
        dist = metadata.distribution("torchao")
    except metadata.PackageNotFoundError:
        return []
    return [Path(str(dist.locate_file(f))) for f in dist.files or [] if _KERNEL.match(str(f))]


def kernel_cudart() -> list[str]:
    """The CUDA runtimes (`libcudart.so.13`) torchao's `_C_mxfp8` links (ELF DT_NEEDED)."""
    found: list[str] = []
    for path in kernel_files():
        try:
            names = elf_needed.needed(path)
        except (OSError, ValueError, struct.error):
            continue
        found += [n for n in names if n.startswith("libcudart.so") and n not in found]
    return found


def kernel_problem(torch_cuda: str | None = None) -> str | None:
    """Why torchao's MXFP8 CUDA extension will not load next to this torch (None when nothing
    on disk says so). A hint only: whether the op got its CUDA kernel is asked of torch's
    dispatcher at the start of a run (torchao_backend.convert_mx). The file's `cpython-310` tag
    means nothing here: the extension is a torch op library loaded by torch.ops.load_library,
    with no Python module init; what stops it loading is the CUDA runtime it links."""
    cuda = torch.version.cuda if torch_cuda is None else torch_cuda
    if not kernel_files():
        return "torchao has no MXFP8 CUDA extension (_C_mxfp8): on a GPU the MXFP8 casts need it"
    runtimes = kernel_cudart()
    if not cuda or not runtimes:
        return None
    major = cuda.split(".")[0]
    if any(rt == f"libcudart.so.{major}" for rt in runtimes):
        return None
    linked = ", ".join(runtimes)
    return (
        f"torchao's MXFP8 CUDA kernels (_C_mxfp8) link {linked}, but this torch is built for "
        f"CUDA {cuda}: the extension does not load, so the MXFP8 casts have no CUDA kernel; use "
        f"a torchao built for CUDA {major}, or fp8_recipe tensorwise"
    )
