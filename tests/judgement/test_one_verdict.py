"""One verdict for "will this image run on this host": every entry point - preflight's
image impact, `trainimg compat`, `trainimg run`'s pre-start check, `trainimg verify` and the
matrix rules - reads the image and the host its own way, and all of them give the same status
and the same reason codes over one generated grid of images x drivers x GPUs x kernel-module
flavours x days.

The grid has 1,584 points; a fixed sample of 240 of them plus the hard corners (CORNERS) is
judged through every entry point (each entry point call costs a few milliseconds: the matrix
one applies every matrix rule)."""

from __future__ import annotations

import datetime as dt
import itertools
import random
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import pytest

from builder.engines.base import ImageInfo
from builder.facts import gpus as gpu_rules
from builder.facts import pci_ids
from builder.facts.driver_version import DriverVersion
from builder.judgement.gpu_identity import from_catalogue, identify
from builder.judgement.image import ImageVerdict, judge
from builder.judgement.image_facts import DriverState
from builder.judgement.matrix import check_cell
from builder.launch.gpucheck import check_driver
from builder.launch.request import LaunchHost
from builder.matrix.model import Cell, DriverSpec
from builder.preflight import compat
from builder.preflight import images as img
from builder.preflight.impact import impact
from builder.spec import labels as lab
from builder.verify.host_compat import verdict_here
from builder.workspace import Workspace, open_workspace

REPO = Path(__file__).resolve().parents[2]
CELLS = (
    "rocky9-cu128-py3.12-torch2.11.0-runtime",  # NVIDIA's repository + cuda-compat; no sm_70
    "rocky9-cu128-py3.12-torch2.9.1-runtime",  # ... with sm_70 (Volta)
    "debian12-cu128-py3.11-torch2.9.1-runtime",  # PyPI's CUDA wheels, no cuda-compat
)
DRIVERS = ("470.256.02", "535.216.03", "550.144.03", "565.57.01", "570.26", "570.124.06",
           "580.65.06", "595.71.05", "610.10.01", "620.10.01", "640.10.01")  # fmt: skip
GPUS = ("v100", "t4", "a100", "l40s", "rtx4090", "h100", "gh200", "b200", "b300", "rtx5090",
        "rtx-pro-6000", "rtx-pro-6000-server")  # fmt: skip
FLAVOURS = ("open", "proprietary")
DAYS = (dt.date(2026, 1, 15), dt.date(2026, 12, 1))
# NVML's "Product Brand" per catalogue brand (what nvidia-smi -q prints)
NVML_BRAND = {"nvidia": "NVIDIA", "tesla": "Tesla", "geforce": "GeForce", "nvidiartx": "NVIDIA RTX"}

GRID = list(itertools.product(CELLS, DRIVERS, GPUS, FLAVOURS, DAYS))
CORNERS = [
    (CELLS[0], "570.124.06", "b200", "open", DAYS[1]),  # run vs compat: sm_80/sm_90 on B200
    (CELLS[2], "535.216.03", "h100", "open", DAYS[1]),  # PyPI CUDA on R535: MVC, not 804
    (CELLS[1], "595.71.05", "v100", "open", DAYS[1]),  # Volta past R580, open modules
    (CELLS[1], "580.65.06", "v100", "proprietary", DAYS[0]),
    (CELLS[0], "550.144.03", "b200", "proprietary", DAYS[1]),
    (CELLS[0], "620.10.01", "h100", "open", DAYS[1]),  # R620: CUDA 13 runs 12.8
    (CELLS[0], "620.10.01", "h100", "proprietary", DAYS[1]),
    (CELLS[0], "570.26", "h100", "open", DAYS[0]),  # a 12.8 driver runs 12.8.1
    (CELLS[0], "565.57.01", "rtx4090", "open", DAYS[0]),
    (CELLS[0], "565.57.01", "rtx-pro-6000-server", "open", DAYS[1]),
    (CELLS[2], "640.10.01", "h100", "open", DAYS[1]),  # past the tables: unknown, not extrapolated
]
SAMPLE = sorted(set(random.Random(21).sample(GRID, 240)) | set(CORNERS))


@dataclass(frozen=True)
class Point:
    cell: str
    driver: str
    gpu: str
    flavour: str
    day: dt.date


@cache
def workspace() -> Workspace:
    return open_workspace(REPO / "matrix.yaml", strict=False)


@cache
def cell_of(name: str) -> Cell:
    found = workspace().expansion.find(name)
    assert found is not None
    return found


def nvml_name(key: str) -> str:
    """The name NVML gives the board (NVIDIA's product name of its first PCI id)."""
    return next(p.product for p in pci_ids.PCI_PRODUCTS.values() if p.gpu == key)


def pci_id(key: str) -> int:
    return next(p.device_id for p in pci_ids.PCI_PRODUCTS.values() if p.gpu == key)


def nvml_brand(key: str) -> str:
    return NVML_BRAND[gpu_rules.GPUS[key].brand]


def reference(p: Point) -> ImageVerdict:
    """The judgement itself, on the cell's labels and a catalogue GPU."""
    rec = next(r for r in img.from_workspace(workspace()) if r.cell == p.cell)
    state = DriverState(DriverVersion(p.driver), p.flavour)
    return judge(rec.facts, state, (from_catalogue(p.gpu),), p.day)


def via_preflight(p: Point) -> ImageVerdict:
    """Preflight: the matrix image as preflight reads it, the GPU identified from its PCI id
    and NVML (as merged_gpus does), the driver as the loaded module."""
    records = [r for r in img.from_workspace(workspace()) if r.cell == p.cell]
    gpu = identify(pci_id=pci_id(p.gpu), nvml_name=nvml_name(p.gpu),
                   cc=gpu_rules.GPUS[p.gpu].cc, nvml_brand=nvml_brand(p.gpu))  # fmt: skip
    (row,) = impact(records, (gpu,), DriverState(DriverVersion(p.driver), p.flavour), None, p.day)
    return row.now


def via_compat(p: Point) -> ImageVerdict:
    rec = next(r for r in img.from_workspace(workspace()) if r.cell == p.cell)
    gpu = compat.describe_gpu(p.gpu, None, nvml_brand(p.gpu))
    return compat.answer(rec, DriverVersion(p.driver), gpu, p.flavour, p.day).verdict


def _image_info(p: Point) -> ImageInfo:
    c = cell_of(p.cell)
    return ImageInfo("sha256:" + "0" * 64, (p.cell,), None, 0,
                     lab.cell_labels(c, workspace().matrix.project), lab.env(c), "1000:1000",
                     (), ())  # fmt: skip


def via_run(p: Point) -> ImageVerdict:
    """`trainimg run`: the image as the engine inspects it, the host as hostfacts reads /proc
    and sysfs (driver, module flavour, each GPU's model name and PCI device id)."""
    board = identify(pci_id=pci_id(p.gpu), nvml_name=nvml_name(p.gpu), bus="0000:18:00.0")
    host = LaunchHost("podman", False, 0, 0, gpu_count=1, driver=p.driver,
                      driver_flavour=p.flavour, gpus=(board,))  # fmt: skip
    verdict = check_driver(p.cell, _image_info(p), host, True, p.day).verdict
    assert verdict is not None
    return verdict


def via_verify(p: Point) -> ImageVerdict:
    info = _image_info(p)
    ctx = {
        "image": {"ref": p.cell, "id": info.id, "labels": dict(info.labels), "env": dict(info.env)},
        "host_driver": {"driver": p.driver, "flavour": p.flavour, "gpus": [
            {"name": nvml_name(p.gpu), "pci_id": pci_id(p.gpu), "bus": "0000:18:00.0"}]},
    }  # fmt: skip
    verdict = verdict_here(ctx, p.day)
    assert verdict is not None
    return verdict


def matrix_codes(p: Point) -> set[str]:
    """The matrix rules: the cell with this driver group (its oldest driver and flavour) and
    this one target GPU; every finding's reason code."""
    version = DriverVersion(p.driver)
    driver = DriverSpec(f"r{version.major}", version.major, version, p.flavour)
    cell = replace(cell_of(p.cell), driver=driver, gpus=(gpu_rules.GPUS[p.gpu],))
    return {f.reason for f in check_cell(cell, p.day) if f.reason}


@pytest.mark.parametrize("point", SAMPLE, ids=lambda t: "-".join(str(x) for x in t))
def test_every_entry_point_gives_the_same_verdict(
    point: tuple[str, str, str, str, dt.date],
) -> None:
    p = Point(*point)
    want = reference(p)
    for name, got in (
        ("preflight", via_preflight(p)),
        ("compat", via_compat(p)),
        ("run", via_run(p)),
        ("verify", via_verify(p)),
    ):
        assert (got.status, set(got.codes)) == (want.status, set(want.codes)), name
        assert got.severity is want.severity, name
    assert matrix_codes(p) == set(want.codes), "matrix"


def test_the_grid_covers_every_status_and_most_reason_codes() -> None:
    """The sample is worth its time: it reaches every status and the codes that matter."""
    verdicts = [reference(Point(*t)) for t in SAMPLE]
    statuses = {v.status for v in verdicts}
    assert statuses >= {"ok", "mvc", "fwd-compat", "broken", "unknown"}
    codes = {c for v in verdicts for c in v.codes}
    assert codes >= {
        "fwd.compat", "fwd.unsupported-branch", "fwd.ineligible-gpu", "cuda.mvc",
        "require.hook-refuses", "require.unsatisfied", "gpu.branch-too-old",
        "gpu.branch-dropped", "gpu.needs-open-modules", "gpu.open-unsupported",
        "image.no-kernel-image", "driver.proprietary-removed", "driver.eol", "driver.unlisted",
        "driver.eol-soon", "driver.supported",
    }  # fmt: skip
