"""Apply the compatibility rules to a cell: every fact that admits or excludes it, with sources.

Each rule yields Findings; `ok` findings are the facts that admit the cell (what `matrix
explain` prints), `warn` ones are true but worth knowing, `error` ones make the matrix invalid.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum

from builder.errors import MatrixError
from builder.facts import cuda as cuda_rules
from builder.facts import drivers as driver_rules
from builder.facts import gpus as gpu_rules
from builder.facts import sources, torch_builds
from builder.facts.oses import GLIBC_SOURCE
from builder.facts.sources import Source
from builder.labels import BASE_PINNED_LABEL, cell_arch_list
from builder.matrix.expand import Expansion
from builder.matrix.model import Cell, Matrix

MATRIX_SOURCE = Source("matrix.yaml")
EOL_WARN_DAYS = 180


class Severity(StrEnum):
    OK = "ok"
    WARN = "warn"
    ERROR = "error"


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: Severity
    message: str
    sources: tuple[Source, ...] = ()
    axis: str | None = None  # the axis whose value the finding is about, for line numbers


Rule = Callable[[Cell, dt.date], Iterator[Finding]]
OK, WARN, ERROR = Severity.OK, Severity.WARN, Severity.ERROR


def _os_python(cell: Cell, today: dt.date) -> Iterator[Finding]:
    d = cell.os.distro
    if cell.python not in d.pythons:
        yield Finding(
            "os.python",
            ERROR,
            f"{d.name} ships Python {', '.join(d.pythons)}, not {cell.python}",
            (d.source,),
            "python",
        )
    elif cell.python not in cell.os.python:
        yield Finding(
            "os.python",
            ERROR,
            f"oses.{cell.os.key}.python has no package pin for Python {cell.python}",
            (MATRIX_SOURCE,),
            "python",
        )
    else:
        pin = cell.os.python[cell.python]
        how = f"{pin.name} {pin.version}" if pin.version else f"{pin.name} (in the base image)"
        yield Finding(
            "os.python", OK, f"{d.name} ships Python {cell.python}: {how}", (d.source,), "python"
        )


def _os_gcc(cell: Cell, today: dt.date) -> Iterator[Finding]:
    if cell.flavour != "devel":
        return
    d = cell.os.distro
    if int(cell.gcc) not in d.gcc_majors:
        yield Finding(
            "os.gcc",
            ERROR,
            f"{d.name} ships gcc {', '.join(map(str, d.gcc_majors))}, not gcc {cell.gcc}",
            (GLIBC_SOURCE,),
            "gcc",
        )
    elif cell.gcc not in cell.os.gcc:
        yield Finding(
            "os.gcc",
            ERROR,
            f"oses.{cell.os.key}.gcc has no package pins for gcc {cell.gcc} "
            "(devel images install it)",
            (MATRIX_SOURCE,),
            "gcc",
        )
    else:
        pins = ", ".join(f"{p.name} {p.version}" for p in cell.os.gcc[cell.gcc])
        yield Finding(
            "os.gcc", OK, f"devel flavour installs gcc {cell.gcc}: {pins}", (GLIBC_SOURCE,), "gcc"
        )


def _os_glibc(cell: Cell, today: dt.date) -> Iterator[Finding]:
    d = cell.os.distro
    floor = torch_builds.MANYLINUX_GLIBC
    sev = OK if d.glibc >= floor else ERROR
    yield Finding(
        "os.glibc",
        sev,
        f"{d.name} has glibc {d.glibc}; torch's manylinux_2_28 wheels need >= {floor}",
        (GLIBC_SOURCE, torch_builds.MANYLINUX_SOURCE),
        "os",
    )


def _os_eol(cell: Cell, today: dt.date) -> Iterator[Finding]:
    d = cell.os.distro
    left = (d.eol - today).days
    if left < 0:
        yield Finding(
            "os.eol", WARN, f"{d.name} reached end of life on {d.eol}", (d.eol_source,), "os"
        )
    elif left <= EOL_WARN_DAYS:
        yield Finding(
            "os.eol",
            WARN,
            f"{d.name} reaches end of life on {d.eol} ({left} days)",
            (d.eol_source,),
            "os",
        )
    else:
        yield Finding("os.eol", OK, f"{d.name} is supported until {d.eol}", (d.eol_source,), "os")


def _base_pinned(cell: Cell, today: dt.date) -> Iterator[Finding]:
    if cell.os.local:
        yield Finding(
            "base.pinned",
            OK,
            f"base {cell.os.base} is made locally (trainimg base), never pulled",
            (MATRIX_SOURCE,),
            "os",
        )
    elif cell.os.digest:
        yield Finding(
            "base.pinned", OK, f"base pinned by digest: {cell.os.base_ref}", (MATRIX_SOURCE,), "os"
        )
    else:
        yield Finding(
            "base.pinned",
            WARN,
            f"base {cell.os.base} is not pinned by digest: the image is labelled "
            f"{BASE_PINNED_LABEL}=false; add oses.{cell.os.key}.digest",
            (MATRIX_SOURCE,),
            "os",
        )


def _torch_build(cell: Cell, today: dt.date) -> Iterator[Finding]:
    if cell.accelerator == "cpu":
        yield Finding("torch.build", OK, f"torch {cell.torch} is a CPU build", (), "torch")
        return
    assert cell.cuda is not None
    tag = cuda_rules.cuda_tag(cell.cuda.version)
    if tag != "cu128":
        yield Finding(
            "torch.build",
            ERROR,
            f"the rules know cu128 torch builds only; CUDA {cell.cuda.version} "
            f"would need {tag} wheels",
            (torch_builds.CU128_SOURCE,),
            "cuda",
        )
    elif not torch_builds.has_cu128(cell.torch):
        yield Finding(
            "torch.build",
            ERROR,
            f"torch {cell.torch.public} has no cu128 build (cu128 wheels exist for "
            f"{', '.join(torch_builds.CU128_TORCH)}; 2.11 is the last)",
            (torch_builds.CU128_SOURCE,),
            "torch",
        )
    else:
        yield Finding(
            "torch.build",
            OK,
            f"torch {cell.torch} is published for cu128",
            (torch_builds.CU128_SOURCE,),
            "torch",
        )


def _torch_python(cell: Cell, today: dt.date) -> Iterator[Finding]:
    tags = torch_builds.python_tags(cell.torch)
    src = (torch_builds.PYTHON_TAGS_SOURCE,)
    if tags is None:
        yield Finding(
            "torch.python",
            ERROR,
            f"no facts about which Pythons torch {cell.torch.public} supports "
            f"(known: {', '.join(torch_builds.PYTHON_TAGS)})",
            src,
            "torch",
        )
    elif cell.python not in tags:
        yield Finding(
            "torch.python",
            ERROR,
            f"torch {cell.torch.public} ships wheels for Python {', '.join(tags)}, "
            f"not {cell.python}",
            src,
            "python",
        )
    else:
        yield Finding(
            "torch.python",
            OK,
            f"torch {cell.torch.public} ships a cp{cell.python.replace('.', '')} wheel",
            src,
            "python",
        )


def _fp8_backend(cell: Cell, today: dt.date) -> Iterator[Finding]:
    if cell.fp8 == "torchao":
        ao = torch_builds.torchao_for(cell.torch)
        src = (torch_builds.TORCHAO_SOURCE,)
        if ao is None:
            yield Finding(
                "fp8.torchao",
                ERROR,
                f"no torchao release is known to pair with torch {cell.torch.public}",
                src,
                "torch",
            )
        else:
            yield Finding(
                "fp8.torchao", OK, f"torchao {ao} pairs with torch {cell.torch.public}", src, "fp8"
            )
    elif cell.fp8 == "transformer-engine":
        src = (
            Source(
                "https://docs.nvidia.com/deeplearning/transformer-engine/user-guide/"
                "installation.html",
                confirmed=False,
            ),
        )
        if cell.accelerator != "cuda" or cell.flavour != "devel":
            yield Finding(
                "fp8.transformer-engine",
                ERROR,
                "Transformer Engine compiles its PyTorch extension against the CUDA "
                "toolkit: it needs a cuda accelerator and the devel flavour",
                src,
                "fp8",
            )
        else:
            yield Finding(
                "fp8.transformer-engine",
                OK,
                "Transformer Engine builds against this devel image's CUDA",
                src,
                "fp8",
            )


def _cuda_driver(cell: Cell, today: dt.date) -> Iterator[Finding]:
    if cell.cuda is None or cell.driver is None:
        return
    try:
        rel = cuda_rules.release(cell.cuda.version)
    except cuda_rules.UnknownCudaRelease as exc:
        yield Finding("cuda.release", ERROR, str(exc), (sources.CUDA_RELEASE_NOTES,), "cuda")
        return
    drv = cell.driver
    if drv.min_version >= rel.min_driver:
        yield Finding(
            "cuda.driver",
            OK,
            f"CUDA {rel.version} needs driver >= {rel.min_driver}; {drv.key} starts at "
            f"{drv.min_version}",
            (rel.source,),
            "driver",
        )
        return
    why = (
        f"CUDA {rel.version} needs driver >= {rel.min_driver}, but {drv.key} starts at "
        f"{drv.min_version}"
    )
    floor = cuda_rules.MVC_FLOOR.get(rel.version.major)
    extra = ""
    if floor is not None and drv.min_version >= floor:
        extra += (
            f"; minor-version compatibility (>= {floor}) would run it only with "
            f"{cuda_rules.MVC_LIMITS}"
        )
    fwd = cuda_rules.FORWARD_COMPAT_BRANCHES.get(cuda_rules.minor(rel.version), ())
    if drv.branch in fwd:
        extra += "; forward compatibility (cuda-compat) works there on data center GPUs only"
    yield Finding(
        "cuda.driver",
        ERROR,
        why + extra,
        (rel.source, cuda_rules.MVC_SOURCE, cuda_rules.FORWARD_COMPAT_SOURCE),
        "driver",
    )


def _cuda_repo(cell: Cell, today: dt.date) -> Iterator[Finding]:
    if cell.cuda is None:
        return
    fam = cell.os.family
    if cell.os.local:  # air-gapped: the CUDA user-space is PyPI's nvidia-* wheels torch needs
        yield from _cuda_from_pypi(cell)
    elif fam not in cell.cuda.repos:
        yield Finding(
            "cuda.repo",
            ERROR,
            f"cuda.{cell.cuda.version} has no package repository for the {fam} family "
            f"(has: {', '.join(cell.cuda.repos) or 'none'})",
            (MATRIX_SOURCE,),
            "cuda",
        )
    elif cell.flavour == "devel" and not cell.cuda.repos[fam].devel:
        yield Finding(
            "cuda.repo",
            ERROR,
            f"cuda.{cell.cuda.version}.{fam} lists no devel packages for a devel cell",
            (MATRIX_SOURCE,),
            "flavour",
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
            src,
            "torch",
        )
        return
    good = [m for m, b in torch_builds.PYPI_CUDA_BUILD.items() if b == want]
    yield Finding(
        "cuda.repo",
        ERROR,
        f"torch {cell.torch.public} on PyPI is {f'the {have} build' if have else 'no known build'}"
        f", not {want}; a cell on the locally made base {cell.os.base} installs PyPI's wheels "
        f"only: pick a torch whose PyPI wheel is {want} ({', '.join(good) or 'none known'})",
        src,
        "torch",
    )
    if cell.flavour == "devel":
        yield Finding(
            "cuda.repo",
            ERROR,
            f"a {want} devel cell on {cell.os.base} has no nvcc or CUDA headers (PyPI's wheels "
            "carry run-time libraries): use an EL9 devel cell",
            src,
            "flavour",
        )


def _cuda_gcc(cell: Cell, today: dt.date) -> Iterator[Finding]:
    if cell.cuda is None:
        return
    rng = cuda_rules.HOST_COMPILERS.get(cuda_rules.minor(cell.cuda.version))
    if rng is None:
        yield Finding(
            "cuda.gcc",
            ERROR,
            f"no host-compiler facts for CUDA {cuda_rules.minor(cell.cuda.version)}",
            (),
            "cuda",
        )
        return
    ok = rng.gcc_min <= int(cell.gcc) <= rng.gcc_max
    yield Finding(
        "cuda.gcc",
        OK if ok else ERROR,
        f"nvcc {cuda_rules.minor(cell.cuda.version)} accepts gcc {rng.gcc_min}.."
        f"{rng.gcc_max}; the cell uses gcc {cell.gcc}",
        (rng.source,),
        "gcc",
    )


def _driver_module(cell: Cell, today: dt.date) -> Iterator[Finding]:
    drv = cell.driver
    if drv is None:
        return
    src = (driver_rules.MODULE_SOURCE,)
    if (
        drv.kernel_module == "proprietary"
        and drv.branch >= driver_rules.PROPRIETARY_REMOVED_FROM_BRANCH
    ):
        yield Finding(
            "driver.module",
            ERROR,
            f"branch {drv.branch} has no proprietary kernel modules (removed from "
            f"R{driver_rules.PROPRIETARY_REMOVED_FROM_BRANCH})",
            src,
            "driver",
        )
    else:
        yield Finding(
            "driver.module",
            OK,
            f"{drv.key} uses the {drv.kernel_module} kernel modules",
            src,
            "driver",
        )


def _driver_eol(cell: Cell, today: dt.date) -> Iterator[Finding]:
    drv = cell.driver
    if drv is None:
        return
    life = driver_rules.BRANCH_LIFECYCLE.get(drv.branch)
    if life is None or life.eol is None:
        yield Finding(
            "driver.eol",
            WARN,
            f"no end-of-life date is published for R{drv.branch}: check NVIDIA's "
            "driver lifecycle before relying on it",
            (sources.DATACENTER_DRIVER_LIFECYCLE,),
            "driver",
        )
    elif life.eol < today:
        yield Finding(
            "driver.eol",
            WARN,
            f"R{drv.branch} ({life.kind}) reached end of life on {life.eol}",
            (life.source,),
            "driver",
        )
    else:
        yield Finding(
            "driver.eol",
            OK,
            f"R{drv.branch} ({life.kind}) is supported until {life.eol}",
            (life.source,),
            "driver",
        )


def _gpus(cell: Cell, today: dt.date) -> Iterator[Finding]:
    if cell.accelerator == "cpu":
        if cell.gpus:
            yield Finding(
                "gpu.cpu-cell",
                ERROR,
                f"a CPU cell targets no GPU, but the group lists "
                f"{', '.join(g.key for g in cell.gpus)}",
                (MATRIX_SOURCE,),
                "accelerator",
            )
        return
    arches = cell_arch_list(cell)
    arch_src = torch_builds.ARCH_LIST_SOURCES.get(torch_builds.torch_minor(cell.torch))
    for g in cell.gpus:
        cc = f"{g.cc[0]}.{g.cc[1]}"
        sass = gpu_rules.covering_sass(arches, g.cc)
        srcs = tuple(s for s in (arch_src, gpu_rules.SASS_COMPAT_SOURCE, g.source) if s)
        if sass is None:
            yield Finding(
                "gpu.arch",
                ERROR,
                f"{g.name} ({g.sm}) has no kernel image in torch {cell.torch}: compiled "
                f"for {' '.join(arches) or 'nothing'} (cudaErrorNoKernelImageForDevice "
                "209)",
                srcs,
                "torch",
            )
            continue
        yield Finding(
            "gpu.arch",
            OK,
            f"{g.name} ({cc}) runs the {sass} SASS of torch {cell.torch}",
            srcs,
            "torch",
        )
        if cell.cuda is not None and cell.cuda.version < g.min_cuda:
            yield Finding(
                "gpu.cuda",
                WARN,
                f"CUDA {cell.cuda.version} has no native target for {g.name} ({cc}; "
                f"first in {g.min_cuda}); it runs {sass} SASS by same-major "
                "compatibility, but kernels you compile cannot target it",
                (g.source, gpu_rules.SASS_COMPAT_SOURCE),
                "cuda",
            )
        drv = cell.driver
        if drv is not None:
            if drv.branch < g.min_branch:
                yield Finding(
                    "gpu.driver",
                    ERROR,
                    f"{g.name} needs driver branch R{g.min_branch} or newer; "
                    f"{drv.key} is R{drv.branch}",
                    (g.source,),
                    "driver",
                )
            else:
                yield Finding(
                    "gpu.driver",
                    OK,
                    f"{g.name} is supported from R{g.min_branch}",
                    (g.source,),
                    "driver",
                )
            if g.needs_open_modules and drv.kernel_module != "open":
                yield Finding(
                    "gpu.open-modules",
                    ERROR,
                    f"{g.name} needs the open kernel modules (proprietary ones are "
                    f"unsupported on Grace Hopper and Blackwell); {drv.key} is "
                    f"{drv.kernel_module}",
                    (gpu_rules.OPEN_MODULES_SOURCE,),
                    "driver",
                )
            elif drv.kernel_module == "open" and g.cc < driver_rules.OPEN_MODULES_MIN_CC:
                yield Finding(
                    "gpu.open-modules",
                    ERROR,
                    f"the open kernel modules need Turing (7.5) or newer; {g.name} is {cc}",
                    (gpu_rules.OPEN_MODULES_SOURCE,),
                    "driver",
                )
        if cell.fp8 != "none" and g.cc < gpu_rules.FP8_MIN_CC:
            yield Finding(
                "gpu.fp8",
                WARN,
                f"{g.name} ({cc}) has no FP8 tensor cores (sm_89+): the trainer "
                "refuses FP8 presets there and BF16 is the ceiling",
                (gpu_rules.FP8_SOURCE,),
                "fp8",
            )
        elif cell.fp8 != "none" and g.cc in gpu_rules.ROWWISE_UNSUPPORTED_CC:
            yield Finding(
                "gpu.fp8",
                OK,
                f"{g.name} ({cc}) runs FP8 with tensor-wise scaling only (row-wise "
                "scaled_mm is unsupported on sm_120)",
                (gpu_rules.ROWWISE_SOURCE,),
                "fp8",
            )


RULES: tuple[Rule, ...] = (
    _os_python,
    _os_gcc,
    _os_glibc,
    _os_eol,
    _base_pinned,
    _torch_build,
    _torch_python,
    _fp8_backend,
    _cuda_driver,
    _cuda_repo,
    _cuda_gcc,
    _driver_module,
    _driver_eol,
    _gpus,
)


def check_cell(cell: Cell, today: dt.date) -> list[Finding]:
    return [f for rule in RULES for f in rule(cell, today)]


def first_error(matrix: Matrix, expansion: Expansion, today: dt.date) -> MatrixError | None:
    """The first rule violation as a MatrixError pointing at the matrix line that caused it."""
    for cell in expansion.cells:
        for f in check_cell(cell, today):
            if f.severity is ERROR:
                return violation(matrix, cell, f)
    return None


def violation(matrix: Matrix, cell: Cell, f: Finding) -> MatrixError:
    keypath = cell.origin.get(f.axis or "", None)
    line = matrix.lines.get(keypath) if keypath else None
    return MatrixError(matrix.path, f"cell {cell.name}: [{f.rule}] {f.message}", keypath, line)
