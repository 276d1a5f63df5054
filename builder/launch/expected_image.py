"""An image as trainimg builds it, where no engine can be asked (pure): a login node writing an
sbatch script, `trainimg run --dry-run --engine podman` on a machine without one. The layout is
the image contract (docs/architecture.md: the venv's python, `-m trainer`, uid 1000); a matrix
cell adds its environment (NVIDIA_REQUIRE_CUDA, for the driver check) and labels."""

from __future__ import annotations

from builder.engines.base import ImageInfo
from builder.matrix.model import Cell, Project
from builder.spec import layout
from builder.spec.labels import TRAINER_VERSION_LABEL, cell_labels, env
from builder.spec.trainer_version import trainer_version


def expected_image(ref: str, cell: Cell | None = None, project: Project | None = None) -> ImageInfo:
    labels = cell_labels(cell, project) if cell is not None and project is not None else {}
    return ImageInfo(
        id="sha256:" + "0" * 64,  # unknown: never asked
        tags=(ref,),
        digest=None,
        size=0,
        labels=labels | {TRAINER_VERSION_LABEL: trainer_version()},
        env=env(cell) if cell is not None else {},
        user=f"{layout.USER_ID}:{layout.USER_ID}",
        entrypoint=layout.ENTRYPOINT,
        cmd=layout.CMD,
    )
