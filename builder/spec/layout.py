"""The image layout: every path and id inside a trainimg image, defined here once (pure).

This is the image contract (docs/architecture.md, "Image layout"): what the Containerfile
templates create (they get these values through render.template_vars), what the labels and
environment point at, and what launch, verify, extend and the scans expect to find. The venv
holds Python and every wheel; the trainer package lies under TRAINER_HOME (PYTHONPATH), owned by
root; the unprivileged USER_NAME (uid and gid USER_ID) runs it in WORKDIR, with its home and the
volume mount points group 0 and group-writable (SHARED_MODE), so any uid in group 0 runs it too.

The trainer never imports this (it is the payload, not the builder): its own defaults stay in
trainer/. The CUDA toolkit's directory is a function of the cell's CUDA release (cuda_home),
not a constant.
"""

from __future__ import annotations

from packaging.version import Version

from builder.facts import cuda as cuda_rules

VENV = "/opt/venv"
VENV_PYTHON = f"{VENV}/bin/python"
VENV_PIP = f"{VENV}/bin/pip"
TRAINER_HOME = "/opt/trainimg"  # PYTHONPATH: the package is TRAINER_HOME/trainer
TRAINER_MODULE = "trainer"
ENTRYPOINT = (VENV_PYTHON, "-m", TRAINER_MODULE)
CMD = ("--help",)

USER_NAME = "trainer"
USER_ID = 1000  # uid and gid (useradd --user-group)
USER_HOME = f"/home/{USER_NAME}"
WORKDIR = "/workspace"
DATA_DIR = "/data"  # a dataset, mounted read-only
CKPT_DIR = "/ckpt"  # checkpoints, mounted read-write
# group 0 owns these and may write them (setgid: what one uid writes stays in the group)
SHARED_DIRS = (USER_HOME, WORKDIR, DATA_DIR, CKPT_DIR)
SHARED_MODE = "2775"

# Where GKE-style driver injection mounts the host's driver libraries and tools (NVIDIA's CUDA
# images put them on the library and binary paths: "Required for nvidia-docker v1").
NVIDIA_INJECTED = "/usr/local/nvidia"
CUDA_LINK = "/usr/local/cuda"  # -> cuda_home(version), where a toolkit or cuda-compat is
# Where the NVIDIA container toolkit looks for the forward-compatibility libcuda (its CDI hook
# enable-cuda-compat: NVIDIA/nvidia-container-toolkit internal/discover/compat_libs.go).
COMPAT_DIR = f"{CUDA_LINK}/compat"
# devel: the link-time names (lib<name>.so) of the CUDA libraries torch's wheels carry only as
# lib<name>.so.N, on LIBRARY_PATH, so `-lcublas -lnccl` links against the very libraries torch
# loads (labels.NVIDIA_WHEEL_LINKS).
LINK_DIR = f"{VENV}/lib/nvidia-link"


def cuda_home(cuda: Version) -> str:
    """The CUDA toolkit's directory for a release: /usr/local/cuda-<major>.<minor>."""
    return f"{CUDA_LINK}-{cuda_rules.minor(cuda)}"


def venv_site_packages(python: str) -> str:
    return f"{VENV}/lib/python{python}/site-packages"


def library_roots() -> tuple[str, ...]:
    """Where an image keeps CUDA libraries: torch and the nvidia-* wheels in the venv, and the
    toolkit (devel flavour) or cuda-compat under CUDA_LINK, for every release the facts know."""
    releases = sorted(r.version for r in cuda_rules.CUDA_RELEASES.values())
    return (VENV, CUDA_LINK, *dict.fromkeys(cuda_home(v) for v in releases))
