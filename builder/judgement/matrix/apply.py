"""Apply the registered matrix rules to a cell, and point a blocking finding at the matrix line
that caused it."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from builder.errors import MatrixError
from builder.judgement.finding import Finding
from builder.judgement.registry import registered
from builder.judgement.severity import BLOCK
from builder.lock import BuildRecord
from builder.matrix.expand import Expansion
from builder.matrix.model import Cell, Matrix

# A rule that reads this is called once per target GPU as (cell, gpu, today), after the rules
# about the whole cell, so that each GPU's findings stay together.
PER_GPU = "gpu"
# A rule that reads this judges a cell against its lock record: check_lock, not check_cell.
LOCK_RECORD = "lock"


def check_cell(cell: Cell, today: dt.date) -> list[Finding]:
    """Every registered matrix rule's findings for `cell`, in registration order."""
    findings: list[Finding] = []
    rules = registered("matrix")
    for rule in rules:
        if PER_GPU not in rule.reads and LOCK_RECORD not in rule.reads:
            out: Iterable[Finding] = rule.fn(cell, today)
            findings.extend(out)
    per_gpu = [rule for rule in rules if PER_GPU in rule.reads]
    for gpu in cell.gpus:
        for rule in per_gpu:
            out = rule.fn(cell, gpu, today)
            findings.extend(out)
    return findings


def check_lock(cell: Cell, record: BuildRecord, today: dt.date) -> list[Finding]:
    """The findings of the rules that judge a cell against its lock record (its last build)."""
    findings: list[Finding] = []
    for rule in registered("matrix"):
        if LOCK_RECORD in rule.reads:
            out: Iterable[Finding] = rule.fn(cell, record, today)
            findings.extend(out)
    return findings


def first_error(matrix: Matrix, expansion: Expansion, today: dt.date) -> MatrixError | None:
    """The first blocking finding as a MatrixError pointing at the matrix line that caused it."""
    for cell in expansion.cells:
        for f in check_cell(cell, today):
            if f.severity is BLOCK:
                return violation(matrix, cell, f)
    return None


def violation(matrix: Matrix, cell: Cell, f: Finding) -> MatrixError:
    """`f` as a MatrixError at the line of the axis value it is about (its subject)."""
    keypath = cell.origin.get(f.subject or "", None)
    line = matrix.lines.get(keypath) if keypath else None
    return MatrixError(matrix.path, f"cell {cell.name}: [{f.id}] {f.message}", keypath, line)
