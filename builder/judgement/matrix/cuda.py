"""Rules about the cell's CUDA: a known release, a driver that runs it, where its packages come
from, and a host compiler nvcc accepts."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

from builder.facts import cuda as cuda_rules
from builder.facts import sources, torch_builds
from builder.facts.sources import MATRIX_YAML
from builder.judgement.finding import Finding
from builder.judgement.matrix.cell_image import cell_slice, cell_verdict
from builder.judgement.reasons import OK_
from builder.judgement.registry import check
from builder.judgement.severity import BLOCK, OK
from builder.matrix.model import Cell


@check("cuda.release", "matrix")
def _cuda_release(cell: Cell, today: dt.date) -> Iterator[Finding]:
    """the rules know the cell's CUDA release (said only when they do not)"""
    if cell.cuda is None or cell.driver is None:
        return
    try:
        cuda_rules.release(cell.cuda.version)
    except cuda_rules.UnknownCudaRelease as exc:
        yield Finding(
            "cuda.release",
            BLOCK,
            str(exc),
            sources=(sources.CUDA_RELEASE_NOTES,),
            subject="cuda",
        )


@check("cuda.driver", "matrix")
def _cuda_driver(cell: Cell, today: dt.date) -> Iterator[Finding]:
    """the driver group's oldest driver runs the cell's CUDA natively on its target GPUs (the
    image x host judgement: a caveat - minor-version or forward compatibility - blocks here,
    since a matrix promises native support)"""
    if cell.cuda is None or cell.driver is None:
        return
    try:
        rel = cuda_rules.release(cell.cuda.version)
    except cuda_rules.UnknownCudaRelease:
        return  # cuda.release says so
    drv = cell.driver
    verdict = cell_verdict(cell, today)
    found = cell_slice(cell, today)
    srcs = (rel.source, *dict.fromkeys(s for f in found for s in f.sources))
    need = (
        f"CUDA {rel.version} needs a driver of CUDA {cuda_rules.minor(rel.version)} "
        f"(>= {rel.min_driver} for the release); {drv.key} starts at {drv.min_version}"
    )
    caveats = [f for f in found if f.severity.rank > OK.rank]
    if verdict.status == OK_ and not caveats:
        yield Finding("cuda.driver", OK, need, sources=srcs, subject="driver")
        return
    extra = ""
    floor = cuda_rules.MVC_FLOOR.get(rel.version.major)
    if floor is not None and drv.min_version >= floor and drv.min_version < rel.min_driver:
        extra += (
            f"; minor-version compatibility (>= {floor}) would run it only with "
            f"{cuda_rules.MVC_LIMITS}"
        )
    fwd = cuda_rules.FORWARD_COMPAT_BRANCHES.get(cuda_rules.minor(rel.version), ())
    if drv.branch in fwd:
        extra += "; forward compatibility (cuda-compat) works there on data center GPUs only"
    by_code = {f.reason: f for f in reversed(caveats or found)}  # the first of each code
    for f in sorted(by_code.values(), key=lambda f: -f.severity.rank):
        yield Finding(
            "cuda.driver",
            BLOCK if verdict.status != OK_ or f.severity is BLOCK else f.severity,
            f"{need}: {verdict.status}: {f.message}{extra}",
            f.remediation,
            srcs,
            "driver",
            f.reason,
        )
        extra = ""


@check("cuda.repo", "matrix")
def _cuda_repo(cell: Cell, today: dt.date) -> Iterator[Finding]:
    """the CUDA user-space has a source: the OS family's repository, or PyPI's wheels"""
    if cell.cuda is None:
        return
    fam = cell.os.family
    if cell.os.local:  # air-gapped: the CUDA user-space is PyPI's nvidia-* wheels torch needs
        yield from _cuda_from_pypi(cell)
    elif fam not in cell.cuda.repos:
        yield Finding(
            "cuda.repo",
            BLOCK,
            f"cuda.{cell.cuda.version} has no package repository for the {fam} family "
            f"(has: {', '.join(cell.cuda.repos) or 'none'})",
            sources=(MATRIX_YAML,),
            subject="cuda",
        )
    elif (want := cuda_rules.wrong_repo_dir(fam, cell.cuda.repos[fam].repo)) is not None:
        yield Finding(
            "cuda.repo",
            BLOCK,
            f"cuda.{cell.cuda.version}.{fam}.repo is {cell.cuda.repos[fam].repo}: the {fam} "
            f"family's packages are in NVIDIA's {want} repository",
            remediation=f"use {cuda_rules.NVIDIA_REPO_HOST}{want}/x86_64",
            sources=(cuda_rules.CUDA_REPO_DIRS_SOURCE, MATRIX_YAML),
            subject="cuda",
        )
    elif cell.flavour == "devel" and not cell.cuda.repos[fam].devel:
        yield Finding(
            "cuda.repo",
            BLOCK,
            f"cuda.{cell.cuda.version}.{fam} lists no devel packages for a devel cell",
            sources=(MATRIX_YAML,),
            subject="flavour",
        )


def _cuda_from_pypi(cell: Cell) -> Iterator[Finding]:
    """A cell on a locally made base installs only PyPI's wheels: its torch must be a version
    whose plain PyPI wheel is the cell's CUDA build, which brings the CUDA libraries as wheels."""
    assert cell.cuda is not None
    want = cell.torch.local
    have = torch_builds.pypi_cuda_build(cell.torch)
    src = (torch_builds.PYPI_CUDA_BUILD_SOURCE,)
    if have == want:
        yield Finding(
            "cuda.repo",
            OK,
            f"torch {cell.torch.public} on PyPI is the {want} build: the CUDA user-space comes "
            "as its nvidia-* wheels, from the wheelhouse (no OS package repository)",
            sources=src,
            subject="torch",
        )
        return
    good = [m for m, b in torch_builds.PYPI_CUDA_BUILD.items() if b == want]
    yield Finding(
        "cuda.repo",
        BLOCK,
        f"torch {cell.torch.public} on PyPI is {f'the {have} build' if have else 'no known build'}"
        f", not {want}; a cell on the locally made base {cell.os.base} installs PyPI's wheels "
        f"only: pick a torch whose PyPI wheel is {want} ({', '.join(good) or 'none known'})",
        sources=src,
        subject="torch",
    )
    if cell.flavour == "devel":
        yield Finding(
            "cuda.repo",
            BLOCK,
            f"a {want} devel cell on {cell.os.base} has no nvcc (PyPI's nvidia-cuda-nvcc-cu12 "
            "wheels carry ptxas, libnvvm and nvcc's crt headers but not nvcc itself: measured "
            "12.8.93 and 12.9.86; only CUDA 13's nvidia-cuda-nvcc has it): use an EL9 devel cell",
            sources=src,
            subject="flavour",
        )


@check("cuda.gcc", "matrix")
def _cuda_gcc(cell: Cell, today: dt.date) -> Iterator[Finding]:
    """nvcc accepts the cell's gcc as its host compiler"""
    if cell.cuda is None:
        return
    rng = cuda_rules.HOST_COMPILERS.get(cuda_rules.minor(cell.cuda.version))
    if rng is None:
        yield Finding(
            "cuda.gcc",
            BLOCK,
            f"no host-compiler facts for CUDA {cuda_rules.minor(cell.cuda.version)}",
            subject="cuda",
        )
        return
    ok = rng.gcc_min <= int(cell.gcc) <= rng.gcc_max
    yield Finding(
        "cuda.gcc",
        OK if ok else BLOCK,
        f"nvcc {cuda_rules.minor(cell.cuda.version)} accepts gcc {rng.gcc_min}.."
        f"{rng.gcc_max}; the cell uses gcc {cell.gcc}",
        sources=(rng.source,),
        subject="gcc",
    )
