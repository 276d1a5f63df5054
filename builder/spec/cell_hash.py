"""The cell hash: a stable hash of everything the cell resolves to - axis values, pins,
and the labels and environment its image will carry - so that a changed fact (a new minimum
driver, say) changes it too. It names a cell's `io.trainimg.cell.hash` label and shows in
`trainimg matrix list`.

It is set on each cell after the matrix is expanded (builder/workspace.py), here, above both
the matrix package and builder.spec.labels: the matrix knows nothing of labels.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import replace

from builder.matrix.expand import Expansion
from builder.matrix.model import Cell, Project
from builder.spec.labels import cell_labels, env


def _mirror_identity(cell: Cell) -> dict[str, object]:
    """Where the cell's packages come from when a mirror replaces the public repositories
    (absent otherwise, so an unmirrored cell keeps its hash)."""
    out: dict[str, object] = {}
    if cell.os.mirror is not None:
        out["os_mirror"] = dataclasses.asdict(cell.os.mirror)
    repo = cell.cuda.repos.get(cell.os.family) if cell.cuda else None
    if repo is not None and repo.ca:
        out["cuda_ca"] = [repo.ca, repo.ca_sha256]
    return out


def cell_hash(cell: Cell, project: Project) -> str:
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
                if fam == cell.os.family  # another family's repository is not the cell's
            }
            if cell.cuda
            else None
        ),
        "python_packages": [[p.name, p.version] for p in cell.python_packages],
        "gpus": [g.key for g in cell.gpus],
        **_mirror_identity(cell),
        "labels": cell_labels(cell, project),
        "env": env(cell),
    }
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def with_cell_hashes(expansion: Expansion, project: Project) -> Expansion:
    """The expansion with each cell's cell_hash set."""
    cells = tuple(replace(c, cell_hash=cell_hash(c, project)) for c in expansion.cells)
    return replace(expansion, cells=cells)
