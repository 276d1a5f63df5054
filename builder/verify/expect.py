"""What an image should show from inside, from the matrix cell it was built from (pure).

verify compares three things: the matrix (what was asked for), the image's labels (what the
image claims) and the running container (what is really there). These are the first two.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from builder import labels as label_rules
from builder.facts import cuda as cuda_rules
from builder.matrix.model import Cell, Project
from builder.nvidia_require.write import nvidia_require_cuda

# /etc/os-release of each matrix OS: ID and the VERSION_ID prefix (each distribution's own
# os-release, https://www.freedesktop.org/software/systemd/man/latest/os-release.html).
OS_RELEASE: dict[str, tuple[str, str]] = {
    "centos-stream9": ("centos", "9"),
    "ubi9": ("rhel", "9"),
    "rocky9": ("rocky", "9"),
    "debian12": ("debian", "12"),
}
P = label_rules.PREFIX


def trainer_version(repo_root: Path | None = None) -> str | None:
    """The bundled trainer's __version__, read (not imported: the trainer imports torch)."""
    root = repo_root or Path(__file__).resolve().parents[2]
    init = root / "trainer" / "__init__.py"
    if not init.is_file():
        return None
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Constant):
            continue
        names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        if "__version__" in names and isinstance(node.value.value, str):
            return node.value.value
    return None


def from_cell(cell: Cell, project: Project) -> dict[str, Any]:
    """Everything the matrix says about the image of `cell`, as plain JSON values."""
    cuda = str(cell.cuda.version) if cell.cuda is not None else None
    return {
        "source": "matrix",
        "cell": cell.name,
        "os": cell.os.key,
        "os_release": list(OS_RELEASE.get(cell.os.key, ("", ""))),
        "accelerator": cell.accelerator,
        "flavour": cell.flavour,
        "python": cell.python,
        "torch": str(cell.torch),
        "cuda": cuda,
        "torch_cuda": cuda_rules.minor(cell.cuda.version) if cell.cuda is not None else None,
        "gcc": cell.gcc if cell.flavour == "devel" else None,
        "arch_list": list(label_rules.arch_list(cell)),
        "nvidia_require_cuda": nvidia_require_cuda(cell.cuda.version) if cell.cuda else None,
        "labels": label_rules.labels(cell, project),
        "content_hash": label_rules.content_hash(cell, project),
        "env": label_rules.env(cell),
        "trainer_version": trainer_version(),
    }


def from_labels(image_labels: dict[str, str]) -> dict[str, Any]:
    """Without a matrix cell, the labels are all there is: checks compare the inside to them."""
    cuda = image_labels.get(f"{P}.cuda.version")
    os_key = image_labels.get(f"{P}.os", "")
    return {
        "source": "labels",
        "cell": image_labels.get(f"{P}.cell"),
        "os": os_key,
        "os_release": list(OS_RELEASE.get(os_key, ("", ""))),
        "accelerator": image_labels.get(f"{P}.accelerator"),
        "flavour": image_labels.get(f"{P}.flavour"),
        "python": image_labels.get(f"{P}.python.version"),
        "torch": image_labels.get(f"{P}.torch.version"),
        "cuda": cuda,
        "torch_cuda": ".".join(cuda.split(".")[:2]) if cuda else None,
        "gcc": image_labels.get(f"{P}.gcc.version"),
        "arch_list": image_labels.get(f"{P}.cuda.arch-list", "").split(),
        "nvidia_require_cuda": None,
        "labels": None,
        "content_hash": None,
        "env": None,
        "trainer_version": image_labels.get(f"{P}.trainer.version") or trainer_version(),
    }
