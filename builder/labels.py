"""The labels and environment every image carries, derived from a cell and the rules (pure).

Labels are how verify and preflight learn what an image promises without running it: the
torch build, the CUDA release and its minimum driver, the compiled arch list, the cell and
its content hash. OCI's own keys (org.opencontainers.image.*) come first.
"""

from __future__ import annotations

import hashlib
import json

from builder import __version__
from builder.facts import cuda as cuda_rules
from builder.facts import torch_builds
from builder.matrix.model import Cell, Project
from builder.nvidia_require.write import nvidia_require_cuda

PREFIX = "io.trainimg"
VENV = "/opt/venv"
TRAINER_HOME = "/opt/trainimg"
USER_ID = 1000


def arch_list(cell: Cell) -> tuple[str, ...]:
    arches = torch_builds.arch_list(cell.torch, cell.accelerator)
    return arches if arches is not None else ()


def min_driver(cell: Cell) -> str | None:
    if cell.cuda is None:
        return None
    try:
        return str(cuda_rules.release(cell.cuda.version).min_driver)
    except cuda_rules.UnknownCudaRelease:
        return None


def torchao_version(cell: Cell) -> str | None:
    return torch_builds.torchao_for(cell.torch) if cell.fp8 == "torchao" else None


def env(cell: Cell) -> dict[str, str]:
    out = {
        "PATH": f"{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "PYTHONPATH": TRAINER_HOME,
        "PYTHONUNBUFFERED": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    if cell.cuda is not None:
        if cell.flavour == "devel":
            cuda_home = f"/usr/local/cuda-{cuda_rules.minor(cell.cuda.version)}"
            out["PATH"] = f"{VENV}/bin:{cuda_home}/bin:" + out["PATH"].split(":", 1)[1]
            out["CUDA_HOME"] = cuda_home
            # libcuda.so's link-time stub, as NVIDIA's devel images set it: an extension links
            # against it where no driver is installed (the build host, CI).
            out["LIBRARY_PATH"] = f"{cuda_home}/lib64/stubs"
        out |= {
            "CUDA_VERSION": str(cell.cuda.version),
            "NVIDIA_VISIBLE_DEVICES": "all",
            "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",
            "NVIDIA_REQUIRE_CUDA": nvidia_require_cuda(cell.cuda.version),
        }
    return out


def labels(cell: Cell, project: Project) -> dict[str, str]:
    """Every label of the image except the content hash (which is computed over these)."""
    out = {
        "org.opencontainers.image.title": f"{project.title} {cell.name}",
        "org.opencontainers.image.description": (
            f"torch {cell.torch} on {cell.os.distro.name} ({cell.flavour}) "
            "with the bundled FP8/BF16 trainer"
        ),
        "org.opencontainers.image.version": __version__,
        "org.opencontainers.image.vendor": project.vendor,
        "org.opencontainers.image.licenses": project.licenses,
        "org.opencontainers.image.source": project.source,
        "org.opencontainers.image.ref.name": cell.name,
        "org.opencontainers.image.base.name": cell.os.base,
    }
    if cell.os.digest:
        out["org.opencontainers.image.base.digest"] = cell.os.digest
    p = PREFIX
    out |= {
        f"{p}.cell": cell.name,
        f"{p}.os": cell.os.key,
        f"{p}.os.family": cell.os.family,
        f"{p}.base.pinned": "true" if (cell.os.digest or cell.os.local) else "false",
        f"{p}.accelerator": cell.accelerator,
        f"{p}.flavour": cell.flavour,
        f"{p}.python.version": cell.python,
        f"{p}.torch.version": str(cell.torch),
        f"{p}.fp8.backend": cell.fp8,
    }
    ao = torchao_version(cell)
    if ao:
        out[f"{p}.torchao.version"] = ao
    if cell.flavour == "devel":
        out[f"{p}.gcc.version"] = cell.gcc
    if cell.cuda is not None and cell.driver is not None:
        out |= {
            f"{p}.cuda.version": str(cell.cuda.version),
            f"{p}.cuda.arch-list": " ".join(arch_list(cell)),
            f"{p}.driver.min": min_driver(cell) or "unknown",
            f"{p}.driver.branch": str(cell.driver.branch),
            f"{p}.driver.kernel-module": cell.driver.kernel_module,
        }
    if cell.gpus:
        out[f"{p}.gpus"] = " ".join(g.key for g in cell.gpus)
    return out


def content_hash(cell: Cell, project: Project) -> str:
    """A stable hash of everything the cell resolves to: values, pins, labels and environment."""
    identity = {
        "values": cell.axis_values(),
        "torch": str(cell.torch),
        "base": cell.os.base_ref,
        "os_pins": {
            "python": [cell.os.python[cell.python].name, cell.os.python[cell.python].version]
            if cell.python in cell.os.python
            else None,
            "gcc": [[p.name, p.version] for p in cell.os.gcc.get(cell.gcc, ())],
            "packages": [[p.name, p.version] for p in cell.os.packages],
            "devel": [[p.name, p.version] for p in cell.os.devel_packages],
            "devel_repos": list(cell.os.devel_repos),
        },
        "cuda": (
            {
                fam: [
                    repo.repo,
                    repo.gpgkey_sha256,
                    [[p.name, p.version] for p in repo.runtime],
                    [[p.name, p.version] for p in repo.devel],
                ]
                for fam, repo in sorted(cell.cuda.repos.items())
            }
            if cell.cuda
            else None
        ),
        "python_packages": [[p.name, p.version] for p in cell.python_packages],
        "gpus": [g.key for g in cell.gpus],
        "labels": labels(cell, project),
        "env": env(cell),
    }
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
