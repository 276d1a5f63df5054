"""Helpers to make variants of the small test matrix (tests/data/minimal.yaml)."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

from builder.matrix.expand import Expansion, expand
from builder.matrix.load import parse_matrix
from builder.matrix.model import Cell, Matrix
from builder.spec.cell_hash import with_cell_hashes
from builder.spec.render import BASE_TEMPLATE, TEMPLATE_DIR

DATA = Path(__file__).parent / "data"
REPO = DATA.parent.parent
MINIMAL = (DATA / "minimal.yaml").read_text(encoding="utf-8")
TODAY = dt.date(2026, 11, 29)


def copy_templates(root: Path) -> Path:
    """Put this project's templates into the project at `root` (its Containerfile.base and
    images/templates/), as render looks for them; returns root."""
    shutil.copytree(REPO / TEMPLATE_DIR, root / TEMPLATE_DIR)
    shutil.copy(REPO / BASE_TEMPLATE, root / BASE_TEMPLATE)
    return root


def variant(*replacements: tuple[str, str]) -> str:
    text = MINIMAL
    for old, new in replacements:
        assert old in text, f"{old!r} not in minimal.yaml"
        text = text.replace(old, new, 1)
    return text


def load(*replacements: tuple[str, str]) -> tuple[Matrix, Expansion]:
    matrix = parse_matrix(variant(*replacements), "matrix.yaml")
    return matrix, with_cell_hashes(expand(matrix), matrix.project)


def cell(name: str, *replacements: tuple[str, str]) -> Cell:
    _, expansion = load(*replacements)
    found = expansion.find(name)
    assert found is not None, [c.name for c in expansion.cells]
    return found


# The line that pins rocky9's base by digest, for variants without it.
DIGEST_LINE = "    digest: sha256:" + "0123456789abcdef" * 4 + "\n"
