"""The images whose fate a driver change decides: matrix cells, build records, local images.

Each becomes an ImageRecord: its NVIDIA_REQUIRE_* requirements (as the toolkit collects them),
its compiled arch list and minimum driver (our labels), and where it came from. Matrix cells
get their labels and environment from builder.spec.labels, exactly what a build stamps on them;
images/lock.json is read tolerantly (its schema is young); local images come from the host.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from builder.facts.cuda import CudaSource
from builder.host.parsers import LocalImage
from builder.host.shown import shown
from builder.judgement.image_facts import (
    REQUIREMENT_ERROR,
    ImageFacts,
    arch_list_from_labels,
    requirements_from_env,
    source_from_labels,
)
from builder.nvidia_require.image_env import disable_require
from builder.nvidia_require.write import nvidia_require_cuda
from builder.spec import labels as lab
from builder.spec.labels import (
    CELL_LABEL,
    CUDA_LABEL,
    DRIVER_MIN_LABEL,
)
from builder.workspace import Workspace


@dataclass(frozen=True)
class ImageRecord:
    name: str
    source: str  # matrix | lock | matrix+lock | local
    requirements: tuple[str, ...]  # every NVIDIA_REQUIRE_* value; each must hold
    requirement_origin: str  # where the requirement text came from
    arch_list: tuple[str, ...] | None  # compiled SASS; () for CPU builds, None when unknown
    cuda: str | None
    driver_min: str | None
    disable_require: bool = False
    cell: str | None = None
    requirement_error: str = ""  # the toolkit cannot collect the requirements (hook fails)
    cuda_source: CudaSource = CudaSource.UNKNOWN  # where its CUDA user-space comes from

    @property
    def gpu(self) -> bool:
        return bool(self.requirements) or self.cuda is not None

    @functools.cached_property
    def facts(self) -> ImageFacts:
        """What the judgement (builder/judgement/image.py) reads of the image."""
        return ImageFacts(
            self.name,
            self.requirements,
            self.cuda,
            self.cuda_source,
            self.arch_list,
            self.requirement_error,
            self.disable_require,
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "image": self.name,
            "source": self.source,
            "cell": self.cell,
            "cuda": self.cuda,
            "requirements": list(self.requirements),
            "requirement_origin": self.requirement_origin,
            "arch_list": list(self.arch_list) if self.arch_list is not None else None,
            "driver_min": self.driver_min,
            "disable_require": self.disable_require,
            "requirement_error": self.requirement_error or None,
            "cuda_source": str(self.cuda_source),
        }


def from_workspace(ws: Workspace) -> list[ImageRecord]:
    out = []
    for cell in ws.cells:
        env = lab.env(cell)
        labels = lab.cell_labels(cell, ws.matrix.project)
        reqs, origin = requirements_from_env(env)
        out.append(
            ImageRecord(
                cell.name,
                "matrix",
                reqs,
                "builder.spec.labels (matrix)" if reqs else origin,
                arch_list_from_labels(labels) if cell.cuda is not None else (),
                str(cell.cuda.version) if cell.cuda else None,
                labels.get(DRIVER_MIN_LABEL),
                False,
                cell.name,
                cuda_source=source_from_labels(labels),
            )
        )
    return out


def from_lock(path: Path) -> tuple[list[ImageRecord], list[str]]:
    """Records of images/lock.json ({"schema": 1, "cells": {name: record}}), read tolerantly:
    a record without labels or environment is judged from what it has; notes say what lacked."""
    notes: list[str] = []
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        return [], [f"{path}: cannot read ({exc.strerror})"]
    except json.JSONDecodeError as exc:
        return [], [f"{path}: not JSON ({exc.msg} at line {exc.lineno})"]
    cells = doc.get("cells") if isinstance(doc, dict) else None
    if isinstance(cells, list):
        cells = {
            str(c.get("cell") or c.get("name") or i): c
            for i, c in enumerate(cells)
            if isinstance(c, dict)
        }
    if not isinstance(cells, dict):
        schema = doc.get("schema") if isinstance(doc, dict) else "?"
        return [], [f"{path}: no `cells` mapping (schema {schema})"]
    out = []
    for name, rec in sorted(cells.items()):
        if not isinstance(rec, dict):
            notes.append(f"{path}: cells.{name} is not an object")
            continue
        labels = (
            {str(k): str(v) for k, v in (rec.get("labels") or {}).items()}
            if isinstance(rec.get("labels"), dict)
            else {}
        )
        env = (
            {str(k): str(v) for k, v in (rec.get("env") or {}).items()}
            if isinstance(rec.get("env"), dict)
            else {}
        )
        cuda = rec.get("cuda") or labels.get(CUDA_LABEL)
        reqs, origin = requirements_from_env(env)
        source = source_from_labels(labels)
        if not reqs and cuda:
            windows = source not in (CudaSource.PYPI, CudaSource.TOOLKIT)
            try:
                reqs = (nvidia_require_cuda(Version(str(cuda)), forward_compat=windows),)
                origin = f"derived from CUDA {cuda} (the record holds no environment)"
            except InvalidVersion:
                notes.append(f"{path}: cells.{shown(name)}.cuda {shown(cuda)} is not a version")
        tags = rec.get("tags")
        tag = name if not isinstance(tags, list) or not tags else str(tags[0])
        out.append(
            ImageRecord(
                tag,
                "lock",
                reqs,
                origin,
                arch_list_from_labels(labels) if cuda else (),
                str(cuda) if cuda else None,
                labels.get(DRIVER_MIN_LABEL),
                False,
                labels.get(CELL_LABEL, name),
                cuda_source=source,
            )
        )
    return out, notes


def merge(matrix: list[ImageRecord], lock: list[ImageRecord]) -> list[ImageRecord]:
    """One row per cell: a lock record (what was built) replaces the matrix's own view of it."""
    built = {r.cell: r for r in lock if r.cell}
    out = [_merged(built[m.cell], m) if m.cell in built else m for m in matrix]
    known = {m.cell for m in matrix}
    out += [r for r in lock if r.cell not in known]
    return out


def _merged(lock: ImageRecord, cell: ImageRecord) -> ImageRecord:
    """What was built, with the matrix's view filling what the build record lacks."""
    return ImageRecord(
        lock.name,
        "matrix+lock",
        lock.requirements or cell.requirements,
        lock.requirement_origin if lock.requirements else cell.requirement_origin,
        lock.arch_list if lock.arch_list is not None else cell.arch_list,
        lock.cuda or cell.cuda,
        lock.driver_min or cell.driver_min,
        False,
        cell.cell,
        cuda_source=lock.cuda_source
        if lock.cuda_source is not CudaSource.UNKNOWN
        else cell.cuda_source,
    )


def from_local(images: list[LocalImage]) -> tuple[list[ImageRecord], int]:
    """Local images that ask for a GPU (NVIDIA_REQUIRE_*/CUDA_VERSION or our labels); the
    count of those skipped (no GPU requirement)."""
    out, skipped = [], 0
    for img in images:
        reqs, origin = requirements_from_env(img.env)
        if not reqs and not origin and CELL_LABEL not in img.labels:
            skipped += 1
            continue
        cuda = img.labels.get(CUDA_LABEL) or img.env.get("CUDA_VERSION") or None
        out.append(
            ImageRecord(
                img.names[0] if img.names else img.id[:12],
                "local",
                reqs,
                origin,
                arch_list_from_labels(img.labels) if cuda else (),
                cuda,
                img.labels.get(DRIVER_MIN_LABEL),
                disable_require(img.env),
                img.labels.get(CELL_LABEL),
                origin.removeprefix(REQUIREMENT_ERROR)
                if origin.startswith(REQUIREMENT_ERROR)
                else "",
                source_from_labels(img.labels),
            )
        )
    return out, skipped
