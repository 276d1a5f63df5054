"""The labels and environment every image carries, derived from a cell and the rules (pure).

Labels are how verify and preflight learn what an image promises without running it: the
torch build, the CUDA release and its minimum driver, the compiled arch list, the cell and
its cell hash. OCI's own keys (org.opencontainers.image.*) come first.

Every label key trainimg reads or writes is spelled here once (the *_LABEL constants); the
rest of the toolkit, the verify suite included, refers to these.
"""

from __future__ import annotations

from builder import __version__
from builder.facts import cuda as cuda_rules
from builder.facts import torch_builds
from builder.facts.cuda_wheels import wheel_dir
from builder.matrix.model import Cell, Project
from builder.nvidia_require.write import nvidia_require_cuda
from builder.spec.layout import (
    LINK_DIR,
    NVIDIA_INJECTED,
    TRAINER_HOME,
    USER_HOME,
    USER_NAME,
    VENV,
    cuda_home,
    venv_site_packages,
)

PREFIX = "io.trainimg"
# OCI's pre-defined annotation keys: github.com/opencontainers/image-spec, annotations.md.
OCI_PREFIX = "org.opencontainers.image"
OCI_REF_NAME_LABEL = f"{OCI_PREFIX}.ref.name"
OCI_VENDOR = f"{OCI_PREFIX}.vendor"  # the project's vendor: the image's SBOM supplier
OCI_LICENSES = f"{OCI_PREFIX}.licenses"  # the project's licence: the image's and trainer's

# What a cell says about its image (labels() below).
CELL_LABEL = f"{PREFIX}.cell"
CELL_HASH_LABEL = f"{PREFIX}.cell.hash"  # spec/cell_hash.py, added by render
OS_LABEL = f"{PREFIX}.os"
OS_FAMILY_LABEL = f"{PREFIX}.os.family"
BASE_PINNED_LABEL = f"{PREFIX}.base.pinned"
ACCELERATOR_LABEL = f"{PREFIX}.accelerator"
FLAVOUR_LABEL = f"{PREFIX}.flavour"
PYTHON_LABEL = f"{PREFIX}.python.version"
TORCH_LABEL = f"{PREFIX}.torch.version"
FP8_BACKEND_LABEL = f"{PREFIX}.fp8.backend"
TORCHAO_LABEL = f"{PREFIX}.torchao.version"
GCC_LABEL = f"{PREFIX}.gcc.version"
CUDA_LABEL = f"{PREFIX}.cuda.version"
ARCH_LIST_LABEL = f"{PREFIX}.cuda.arch-list"
CUDA_SOURCE_LABEL = f"{PREFIX}.cuda.source"  # builder.facts.cuda.CudaSource: compat, pypi, ...
DRIVER_MIN_LABEL = f"{PREFIX}.driver.min"
DRIVER_BRANCH_LABEL = f"{PREFIX}.driver.branch"
KERNEL_MODULE_LABEL = f"{PREFIX}.driver.kernel-module"
GPUS_LABEL = f"{PREFIX}.gpus"
# Added by the build (builder/build/builder.py): the bundled trainer and the build context's hash.
TRAINER_VERSION_LABEL = f"{PREFIX}.trainer.version"
BUILD_HASH_LABEL = f"{PREFIX}.build.hash"
# ... as build arguments the Containerfile's last LABEL reads, not as the build's own labels:
# libpod stamps those on every stage's intermediate images too, and its layer cache then hands
# one build's values to the next build's history (a cached build and a cold build of the same
# inputs got different ids; measured, builder/build/source_date.py).
BUILD_LABEL_ARGS = {
    TRAINER_VERSION_LABEL: "TRAINIMG_TRAINER_VERSION",
    BUILD_HASH_LABEL: "TRAINIMG_BUILD_HASH",
}
# An extended image (trainimg extend, builder/extend/): its own name and the image it was built
# FROM, by cell, image id and (where the engine reports one) manifest digest.
EXTENSION_LABEL = f"{PREFIX}.extension"
PARENT_CELL_LABEL = f"{PREFIX}.parent.cell"
PARENT_IMAGE_LABEL = f"{PREFIX}.parent.image"
PARENT_DIGEST_LABEL = f"{PREFIX}.parent.digest"
# The offline Debian base (builder/build/base_image.py).
BASE_SUITE_LABEL = f"{PREFIX}.base.suite"
BASE_SUITES_LABEL = f"{PREFIX}.base.suites"
BASE_LISTS_DATE_LABEL = f"{PREFIX}.base.lists-date"
BASE_RECIPE_LABEL = f"{PREFIX}.base.recipe"  # BaseSpec.key: an image of another recipe is remade
# On containers, so leftovers can be found and counted.
VERIFY_LABEL = f"{PREFIX}.verify"  # every container verify or arches starts
RUN_LABEL = f"{PREFIX}.run"  # every container `trainimg run` starts


# The arch-list label's value when no fact records the torch build's arch list: "unknown",
# never an empty list (which would read as "compiled for nothing").
ARCH_LIST_UNKNOWN = "unknown"


def cell_arch_list(cell: Cell) -> tuple[str, ...] | None:
    """The SASS the cell's torch was compiled for: () for a CPU cell, None when unknown."""
    return torch_builds.arch_list(cell.torch, cell.accelerator)


def arch_list_text(arches: tuple[str, ...] | None) -> str:
    """An arch list as a label or a message says it: "unknown" when no fact records it."""
    return ARCH_LIST_UNKNOWN if arches is None else " ".join(arches)


def cuda_source(cell: Cell) -> cuda_rules.CudaSource | None:
    """Where the cell's CUDA user-space comes from: PyPI's wheels on the locally made base (no
    OS package repository), else NVIDIA's repository, with or without cuda-compat."""
    if cell.cuda is None:
        return None
    if cell.os.local:
        return cuda_rules.CudaSource.PYPI
    repo = cell.cuda.repos.get(cell.os.family)
    runtime = repo.runtime if repo is not None else ()
    if any(p.name.startswith(cuda_rules.COMPAT_PACKAGE_PREFIX) for p in runtime):
        return cuda_rules.CudaSource.COMPAT
    return cuda_rules.CudaSource.TOOLKIT


def require_cuda(cell: Cell) -> str | None:
    """The cell's NVIDIA_REQUIRE_CUDA: brand windows only where the image ships cuda-compat."""
    source = cuda_source(cell)
    if cell.cuda is None or source is None:
        return None
    return nvidia_require_cuda(cell.cuda.version, forward_compat=source.ships_compat)


def min_driver(cell: Cell) -> str | None:
    if cell.cuda is None:
        return None
    try:
        return str(cuda_rules.release(cell.cuda.version).min_driver)
    except cuda_rules.UnknownCudaRelease:
        return None


def torchao_version(cell: Cell) -> str | None:
    return torch_builds.torchao_for(cell.torch) if cell.fp8 == "torchao" else None


# The pip wheels torch loads its CUDA libraries from that also carry headers
# (site-packages/nvidia/<name>/include): a devel image's extensions compile against these, the
# versions torch runs, not a second copy from the OS repositories.
NVIDIA_WHEEL_HEADERS = (
    "cuda_runtime",
    "cuda_nvrtc",
    "cuda_cupti",
    "cublas",
    "cudnn",
    "cufft",
    "cufile",
    "curand",
    "cusolver",
    "cusparse",
    "cusparselt",
    "nccl",
    "nvjitlink",
    "nvshmem",
    "nvtx",
)
# The libraries an extension links by name (-lcublas -lcublasLt -lnccl -lcudnn: TransformerEngine,
# DeepSpeed ops, apex): (the wheel's directory under site-packages/nvidia, the library). The
# wheels hold only lib<name>.so.N; a devel image links lib<name>.so to it in layout.LINK_DIR.
NVIDIA_WHEEL_LINKS = (
    ("cublas", "cublas"),
    ("cublas", "cublasLt"),
    ("nccl", "nccl"),
    ("cudnn", "cudnn"),
)


def wheel_links(cell: Cell) -> list[tuple[str, str]]:
    """A CUDA devel cell's (library's soname prefix in the wheel, its link name) pairs."""
    if cell.cuda is None or cell.flavour != "devel":
        return []
    site = f"{venv_site_packages(cell.python)}/nvidia"
    major = cell.cuda.version.major
    return [
        (f"{site}/{wheel_dir(major, wheel)}/lib/lib{lib}.so.", f"{LINK_DIR}/lib{lib}.so")
        for wheel, lib in NVIDIA_WHEEL_LINKS
    ]


def wheel_include_dirs(cell: Cell) -> list[str]:
    """A CUDA devel cell's CPATH: the include directories of the wheels torch loads, as the
    cell's CUDA major lays them out (CUDA 13: one nvidia/cu13/include for the toolkit's)."""
    assert cell.cuda is not None
    site = f"{venv_site_packages(cell.python)}/nvidia"
    dirs = (wheel_dir(cell.cuda.version.major, name) for name in NVIDIA_WHEEL_HEADERS)
    return [f"{site}/{d}/include" for d in dict.fromkeys(dirs)]


def torch_cuda_arch_list(cell: Cell) -> str:
    """TORCH_CUDA_ARCH_LIST for extensions: the arches the cell's torch was built for."""
    arches = cell_arch_list(cell) or ()
    return " ".join(f"{int(a[3:]) // 10}.{int(a[3:]) % 10}" for a in arches)


def env(cell: Cell) -> dict[str, str]:
    system = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    out = {
        "PATH": f"{VENV}/bin:{system}",
        "PYTHONPATH": TRAINER_HOME,
        "PYTHONUNBUFFERED": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        # Any uid (OpenShift's restricted SCC runs images as an arbitrary uid in group 0, with
        # no passwd entry): torch.compile asks getpass.getuser(), which reads these before the
        # passwd database, and Triton's cache lives under HOME, which group 0 may write.
        "HOME": USER_HOME,
        "USER": USER_NAME,
        "LOGNAME": USER_NAME,
    }
    if cell.cuda is not None:
        bin_dirs = f"{NVIDIA_INJECTED}/bin"
        if cell.flavour == "devel":
            toolkit = cuda_home(cell.cuda.version)
            bin_dirs = f"{toolkit}/bin:{bin_dirs}"
            out["CUDA_HOME"] = toolkit
            # libcuda.so's link-time stub, as NVIDIA's devel images set it: an extension links
            # against it where no driver is installed (the build host, CI).
            # And the link names of the wheels' math libraries and NCCL (LINK_DIR).
            out["LIBRARY_PATH"] = f"{LINK_DIR}:{toolkit}/lib64/stubs"
            # Without a GPU torch.utils.cpp_extension cannot guess the arches (IndexError):
            # extensions build for the arches torch itself was built for.
            out["TORCH_CUDA_ARCH_LIST"] = torch_cuda_arch_list(cell)
            out["CPATH"] = ":".join(wheel_include_dirs(cell))
        out["PATH"] = f"{VENV}/bin:{bin_dirs}:{system}"
        out["LD_LIBRARY_PATH"] = f"{NVIDIA_INJECTED}/lib:{NVIDIA_INJECTED}/lib64"
        out |= {
            "CUDA_VERSION": str(cell.cuda.version),
            "NVIDIA_VISIBLE_DEVICES": "all",
            "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",
            "NVIDIA_REQUIRE_CUDA": require_cuda(cell) or "",
        }
    return out


def cell_labels(cell: Cell, project: Project) -> dict[str, str]:
    """Every label of the image except the cell hash (which is computed over these)."""
    o = OCI_PREFIX
    out = {
        f"{o}.title": f"{project.title} {cell.name}",
        f"{o}.description": (
            f"torch {cell.torch} on {cell.os.distro.name} ({cell.flavour}) "
            "with the bundled FP8/BF16 trainer"
        ),
        f"{o}.version": __version__,
        f"{o}.vendor": project.vendor,
        f"{o}.licenses": project.licenses,
        f"{o}.source": project.source,
        OCI_REF_NAME_LABEL: cell.name,
        f"{o}.base.name": cell.os.base,
    }
    if cell.os.digest:
        out[f"{o}.base.digest"] = cell.os.digest
    out |= {
        CELL_LABEL: cell.name,
        OS_LABEL: cell.os.key,
        OS_FAMILY_LABEL: cell.os.family,
        BASE_PINNED_LABEL: "true" if (cell.os.digest or cell.os.local) else "false",
        ACCELERATOR_LABEL: cell.accelerator,
        FLAVOUR_LABEL: cell.flavour,
        PYTHON_LABEL: cell.python,
        TORCH_LABEL: str(cell.torch),
        FP8_BACKEND_LABEL: cell.fp8,
    }
    ao = torchao_version(cell)
    if ao:
        out[TORCHAO_LABEL] = ao
    if cell.flavour == "devel":
        out[GCC_LABEL] = cell.gcc
    if cell.cuda is not None and cell.driver is not None:
        out |= {
            CUDA_LABEL: str(cell.cuda.version),
            CUDA_SOURCE_LABEL: str(cuda_source(cell)),
            ARCH_LIST_LABEL: arch_list_text(cell_arch_list(cell)),
            DRIVER_MIN_LABEL: min_driver(cell) or "unknown",
            DRIVER_BRANCH_LABEL: str(cell.driver.branch),
            KERNEL_MODULE_LABEL: cell.driver.kernel_module,
        }
    if cell.gpus:
        out[GPUS_LABEL] = " ".join(g.key for g in cell.gpus)
    return out
