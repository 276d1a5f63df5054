"""Apply the registered matrix rules to a cell, and point a blocking finding at the matrix line
that caused it."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from builder.errors import MatrixError
from builder.judgement.finding import Finding
from builder.judgement.registry import registered
from builder.judgement.severity import BLOCK
from builder.matrix.expand import Expansion
from builder.matrix.model import Cell, Matrix

# A rule that reads this is called once per target GPU as (cell, gpu, today), after the rules
# about the whole cell, so that each GPU's findings stay together.
PER_GPU = "gpu"
# A rule that reads this judges a cell against its lock record: check_lock, not check_cell.
LOCK_RECORD = "lock"
# A rule that reads this judges the matrix's cells together (check_cells), as
# (cells, today, limits): what only the whole matrix can say (is its newest torch behind?).
ALL_CELLS = "cells"


class LastBuild(Protocol):
    """What the pin rules read of a cell's last build (its lock record, builder/build/lock.py):
    when it was built and the RPMs it installed, name -> NEVRA."""

    @property
    def built_at(self) -> str: ...

    @property
    def packages(self) -> Mapping[str, str]: ...


def check_cell(cell: Cell, today: dt.date) -> list[Finding]:
    """Every registered matrix rule's findings for `cell`, in registration order."""
    findings: list[Finding] = []
    rules = registered("matrix")
    for rule in rules:
        if not {PER_GPU, LOCK_RECORD, ALL_CELLS} & set(rule.reads):
            out: Iterable[Finding] = rule.fn(cell, today)
            findings.extend(out)
    per_gpu = [rule for rule in rules if PER_GPU in rule.reads]
    for gpu in cell.gpus:
        for rule in per_gpu:
            out = rule.fn(cell, gpu, today)
            findings.extend(out)
    return findings


def check_cells(
    cells: Sequence[Cell], today: dt.date, limits: StaleLimits
) -> list[tuple[Cell, Finding]]:
    """The findings of the rules that judge the cells together, each with the cell it is about."""
    out: list[tuple[Cell, Finding]] = []
    for rule in registered("matrix"):
        if ALL_CELLS in rule.reads:
            found: Iterable[tuple[Cell, Finding]] = rule.fn(cells, today, limits)
            out.extend(found)
    return out


@dataclass(frozen=True)
class StaleLimits:
    """How far behind the matrix may fall before `matrix check` warns: torch minors behind the
    newest release of a cell's CUDA line, and days since a facts data file was read."""

    minors: int = 2
    days: int = 90


def check_lock(cell: Cell, record: LastBuild, today: dt.date) -> list[Finding]:
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
