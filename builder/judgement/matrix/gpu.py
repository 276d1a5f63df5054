"""Rules about the GPUs a cell targets: a CPU cell targets none; each target GPU has SASS in
the cell's torch, native CUDA support, a driver branch and kernel modules that run it, and FP8
tensor cores when the cell trains in FP8.

The per-GPU rules read "gpu" (apply.PER_GPU): they run once per target GPU, so the findings of
one GPU print together. gpu.arch, gpu.driver and gpu.open-modules report the image x host
judgement's findings about the GPU (builder/judgement/matrix/cell_image.py), all of them, as
preflight and `trainimg compat` do; gpu.cuda and gpu.fp8 say nothing about a GPU torch has no
SASS for.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

from builder.facts import gpus as gpu_rules
from builder.facts import torch_builds
from builder.facts.gpus import Gpu
from builder.facts.sources import MATRIX_YAML
from builder.judgement.finding import Finding
from builder.judgement.matrix.apply import PER_GPU
from builder.judgement.matrix.cell_image import gpu_slice
from builder.judgement.registry import check
from builder.judgement.severity import BLOCK, OK, WARN
from builder.matrix.model import Cell
from builder.spec.labels import cell_arch_list


@check("gpu.cpu-cell", "matrix")
def _gpu_cpu_cell(cell: Cell, today: dt.date) -> Iterator[Finding]:
    """a CPU cell lists no target GPU"""
    if cell.accelerator == "cpu" and cell.gpus:
        yield Finding(
            "gpu.cpu-cell",
            BLOCK,
            f"a CPU cell targets no GPU, but the group lists {', '.join(g.key for g in cell.gpus)}",
            sources=(MATRIX_YAML,),
            subject="accelerator",
        )


def _sass(cell: Cell, g: Gpu) -> str | None:
    """The SASS of the cell's torch that runs on `g`; None on a CPU cell, or when none does."""
    arches = cell_arch_list(cell)
    if cell.accelerator == "cpu" or arches is None:
        return None
    return gpu_rules.covering_sass(arches, g.cc)


def _cc(g: Gpu) -> str:
    return f"{g.cc[0]}.{g.cc[1]}"


@check("gpu.arch", "matrix", reads=(PER_GPU,))
def _gpu_arch(cell: Cell, g: Gpu, today: dt.date) -> Iterator[Finding]:
    """the cell's torch has SASS that runs on the GPU"""
    if cell.accelerator == "cpu":
        return  # gpu.cpu-cell judges a CPU cell's GPUs
    arch_src = torch_builds.arch_list_source(cell.torch)
    srcs = tuple(s for s in (arch_src, gpu_rules.SASS_COMPAT_SOURCE, g.source) if s)
    found = gpu_slice(cell, g, "gpu.arch", today)
    if cell_arch_list(cell) is None:
        yield Finding(
            "gpu.arch",
            WARN,
            f"the arch list of torch {cell.torch} is unknown (no fact records it): whether "
            f"{g.name} ({g.sm}) has a kernel image in it is not checked",
            "record the build's arch list in builder/facts/torch_builds.py (scan its "
            "libtorch_cuda.so with `trainimg arches`)",
            srcs,
            "torch",
        )
        return
    for f in found:
        yield Finding(
            "gpu.arch",
            f.severity,
            f"{g.name} ({g.sm}) has no kernel image in torch {cell.torch}: "
            + f.message.split(": ", 1)[-1],
            f.remediation,
            srcs,
            "torch",
            f.reason,
        )
    if not found:
        yield Finding(
            "gpu.arch",
            OK,
            f"{g.name} ({_cc(g)}) runs the {_sass(cell, g)} SASS of torch {cell.torch}",
            sources=srcs,
            subject="torch",
        )


@check("gpu.cuda", "matrix", reads=(PER_GPU,))
def _gpu_cuda(cell: Cell, g: Gpu, today: dt.date) -> Iterator[Finding]:
    """the cell's CUDA has a native target for the GPU (said only when it has not)"""
    sass = _sass(cell, g)
    if sass is None or cell.cuda is None or cell.cuda.version >= g.min_cuda:
        return
    yield Finding(
        "gpu.cuda",
        WARN,
        f"CUDA {cell.cuda.version} has no native target for {g.name} ({_cc(g)}; "
        f"first in {g.min_cuda}); it runs {sass} SASS by same-major "
        "compatibility, but kernels you compile cannot target it",
        sources=(g.source, gpu_rules.SASS_COMPAT_SOURCE),
        subject="cuda",
    )


@check("gpu.driver", "matrix", reads=(PER_GPU,))
def _gpu_driver(cell: Cell, g: Gpu, today: dt.date) -> Iterator[Finding]:
    """the driver branch supports the GPU (its first and last branch)"""
    drv = cell.driver
    if cell.accelerator == "cpu" or drv is None:
        return
    found = gpu_slice(cell, g, "gpu.driver", today)
    for f in found:
        yield Finding("gpu.driver", f.severity, f.message, f.remediation, (g.source, *f.sources),
                      "driver", f.reason)  # fmt: skip
    if not found:
        last = f" up to R{g.last_branch}" if g.last_branch else ""
        yield Finding(
            "gpu.driver",
            OK,
            f"{g.name} is supported from R{g.min_branch}{last}",
            sources=(g.source,),
            subject="driver",
        )


@check("gpu.open-modules", "matrix", reads=(PER_GPU,))
def _gpu_open_modules(cell: Cell, g: Gpu, today: dt.date) -> Iterator[Finding]:
    """the driver's kernel modules (open or proprietary) run the GPU"""
    drv = cell.driver
    if cell.accelerator == "cpu" or drv is None:
        return
    for f in gpu_slice(cell, g, "gpu.open-modules", today):
        yield Finding(
            "gpu.open-modules", f.severity, f.message, f.remediation,
            (gpu_rules.OPEN_MODULES_SOURCE,), "driver", f.reason,
        )  # fmt: skip


@check("gpu.fp8", "matrix", reads=(PER_GPU,))
def _gpu_fp8(cell: Cell, g: Gpu, today: dt.date) -> Iterator[Finding]:
    """an FP8 cell's GPU has FP8 tensor cores, and which scaling it runs"""
    if _sass(cell, g) is None or cell.fp8 == "none":
        return
    if g.cc < gpu_rules.FP8_MIN_CC:
        yield Finding(
            "gpu.fp8",
            WARN,
            f"{g.name} ({_cc(g)}) has no FP8 tensor cores (sm_89+): the trainer "
            "refuses FP8 presets there and BF16 is the ceiling",
            sources=(gpu_rules.FP8_SOURCE,),
            subject="fp8",
        )
    elif g.cc in gpu_rules.ROWWISE_UNSUPPORTED_CC:
        yield Finding(
            "gpu.fp8",
            OK,
            f"{g.name} ({_cc(g)}) runs FP8 with tensor-wise scaling only (row-wise "
            "scaled_mm is unsupported on sm_120)",
            sources=(gpu_rules.ROWWISE_SOURCE,),
            subject="fp8",
        )
