"""A cell as the image x host judgement reads it (pure): the image its labels describe, the
oldest driver of its driver group, its target GPUs. The matrix rules about the driver and the
GPUs (cuda.driver, driver.module, driver.eol, gpu.arch, gpu.driver, gpu.open-modules) each
report their slice of this one verdict, with its reason codes."""

from __future__ import annotations

import datetime as dt

from builder.facts.cuda import CudaSource
from builder.facts.gpus import Gpu
from builder.judgement.driver_life import LIFECYCLE_ID
from builder.judgement.finding import Finding
from builder.judgement.gpu_identity import GpuIdentity, from_catalogue
from builder.judgement.image import ImageVerdict, judge
from builder.judgement.image_facts import DriverState, ImageFacts
from builder.matrix.model import Cell
from builder.spec import labels as lab

# Which rule reports which reason codes of the verdict (the rest is cuda.driver's).
GPU_RULE_CODES: dict[str, tuple[str, ...]] = {
    "gpu.arch": ("image.no-kernel-image", "image.arch-unknown"),
    "gpu.driver": (
        "gpu.branch-too-old",
        "gpu.branch-dropped",
        "gpu.unidentified",
        "gpu.not-in-catalogue",
    ),
    "gpu.open-modules": ("gpu.needs-open-modules", "gpu.open-unsupported"),
}
DRIVER_MODULE_CODES = ("driver.proprietary-removed",)


def cell_image(cell: Cell) -> ImageFacts:
    """The image the cell's build makes, as its labels and environment describe it."""
    req = lab.require_cuda(cell)
    source = lab.cuda_source(cell)
    return ImageFacts(
        cell.name,
        (req,) if req else (),
        str(cell.cuda.version) if cell.cuda else None,
        source if source is not None else CudaSource.UNKNOWN,
        lab.cell_arch_list(cell) if cell.cuda is not None else (),  # None: unknown
    )


def cell_driver(cell: Cell) -> DriverState | None:
    """The oldest driver of the group, with its kernel-module flavour (the matrix promises
    every driver from there on)."""
    drv = cell.driver
    return DriverState(drv.min_version, drv.kernel_module) if drv is not None else None


def cell_gpus(cell: Cell) -> tuple[GpuIdentity, ...]:
    return tuple(from_catalogue(g.key) for g in cell.gpus)


def cell_verdict(cell: Cell, today: dt.date) -> ImageVerdict:
    return judge(cell_image(cell), cell_driver(cell), cell_gpus(cell), today)


def gpu_slice(cell: Cell, gpu: Gpu, rule: str, today: dt.date) -> list[Finding]:
    """The verdict's findings about `gpu` that `rule` reports."""
    codes = GPU_RULE_CODES[rule]
    name = from_catalogue(gpu.key).name
    found = [f for f in cell_verdict(cell, today).findings if f.reason in codes]
    return [f for f in found if f.subject in (name, None)]


def cell_slice(cell: Cell, today: dt.date) -> list[Finding]:
    """The verdict's findings cuda.driver reports: everything not a GPU rule's, the driver
    module's or the lifecycle's."""
    taken = {c for codes in GPU_RULE_CODES.values() for c in codes} | set(DRIVER_MODULE_CODES)
    return [
        f
        for f in cell_verdict(cell, today).findings
        if f.reason not in taken and f.id != LIFECYCLE_ID
    ]
