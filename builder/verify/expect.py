"""What an image should show from inside, from the matrix cell it was built from (pure).

verify compares three things: the matrix (what was asked for), the image's labels (what the
image claims) and the running container (what is really there). These are the first two.
"""

from __future__ import annotations

from typing import Any

from builder.facts import cuda as cuda_rules
from builder.facts.oses import DISTROS
from builder.matrix.model import Cell, Project
from builder.spec import labels as label_rules
from builder.spec.cell_hash import cell_hash
from builder.spec.trainer_version import TrainerVersionError, trainer_version


def _checkout_trainer_version() -> str | None:
    """The version of the trainer beside this trainimg, or None when there is none to read."""
    try:
        return trainer_version()
    except TrainerVersionError:
        return None


def from_cell(cell: Cell, project: Project) -> dict[str, Any]:
    """Everything the matrix says about the image of `cell`, as plain JSON values."""
    cuda = str(cell.cuda.version) if cell.cuda is not None else None
    return {
        "source": "matrix",
        "cell": cell.name,
        "os": cell.os.key,
        # the distribution's, whatever the OS entry is called (an entry names its distro)
        "os_release": list(cell.os.distro.os_release),
        "accelerator": cell.accelerator,
        "flavour": cell.flavour,
        "python": cell.python,
        "torch": str(cell.torch),
        "cuda": cuda,
        "torch_cuda": cuda_rules.minor(cell.cuda.version) if cell.cuda is not None else None,
        "gcc": cell.gcc if cell.flavour == "devel" else None,
        "arch_list": None if (a := label_rules.cell_arch_list(cell)) is None else list(a),
        "nvidia_require_cuda": label_rules.require_cuda(cell),
        "cuda_source": str(src) if (src := label_rules.cuda_source(cell)) else None,
        "labels": label_rules.cell_labels(cell, project),
        "cell_hash": cell_hash(cell, project),
        "env": label_rules.env(cell),
        "trainer_version": _checkout_trainer_version(),
    }


def from_labels(image_labels: dict[str, str]) -> dict[str, Any]:
    """Without a matrix cell, the labels are all there is: checks compare the inside to them.
    The OS label holds the matrix entry's key: its os-release is known when that key is a
    distribution's (an entry of another name does not say its distro in the labels)."""
    cuda = image_labels.get(label_rules.CUDA_LABEL)
    os_key = image_labels.get(label_rules.OS_LABEL, "")
    distro = DISTROS.get(os_key)
    return {
        "source": "labels",
        "cell": image_labels.get(label_rules.CELL_LABEL),
        "os": os_key,
        "os_release": list(distro.os_release) if distro else ["", ""],
        "accelerator": image_labels.get(label_rules.ACCELERATOR_LABEL),
        "flavour": image_labels.get(label_rules.FLAVOUR_LABEL),
        "python": image_labels.get(label_rules.PYTHON_LABEL),
        "torch": image_labels.get(label_rules.TORCH_LABEL),
        "cuda": cuda,
        "torch_cuda": ".".join(cuda.split(".")[:2]) if cuda else None,
        "gcc": image_labels.get(label_rules.GCC_LABEL),
        "arch_list": image_labels.get(label_rules.ARCH_LIST_LABEL, "").split(),
        "nvidia_require_cuda": None,
        "cuda_source": image_labels.get(label_rules.CUDA_SOURCE_LABEL),
        "labels": None,
        "cell_hash": None,
        "env": None,
        "trainer_version": (
            image_labels.get(label_rules.TRAINER_VERSION_LABEL) or _checkout_trainer_version()
        ),
    }
