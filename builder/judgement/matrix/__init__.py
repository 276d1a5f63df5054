"""The matrix rules: every fact that admits a cell, warns about it or blocks it, with sources.

Each rule is a check of domain "matrix", registered once (`@check`) in the order `matrix
explain` prints its findings: os (and the base image), torch, fp8, cuda, driver, gpu. A rule
takes (cell, today) and yields `Finding`s with its own id; `ok` findings are the facts that
admit the cell, `warn` ones are true but worth knowing, `block` ones make the matrix invalid.
A finding's `subject` is the matrix axis it is about (for the file:line of an error). Rules
that read "gpu" are judged once per target GPU (see `apply`); those that read "lock" judge a
cell against its images/lock.json record (`trainimg matrix check`). The rules are pure: they
read a cell (its record), the date and builder.facts.
"""

# The import order is the order the rules are registered and their findings print.
# isort: off
from builder.judgement.matrix import os, pins, torch, fp8, cuda, driver, gpu, staleness  # noqa: F401

# isort: on
from builder.judgement.matrix.apply import (
    StaleLimits,
    check_cell,
    check_cells,
    check_lock,
    first_error,
    violation,
)

__all__ = ["StaleLimits", "check_cell", "check_cells", "check_lock", "first_error", "violation"]
