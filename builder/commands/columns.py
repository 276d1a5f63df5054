"""A plain-text table that fits the terminal without cutting a value (a cell name is 36-47
characters; a cut one cannot be pasted back), and how wide that terminal is.

A table too wide for its width keeps its first column (the name) and the columns that fit
beside it on a row's first line, and moves the others, aligned among themselves, to indented
lines under it: every value whole, every line within the width unless one value alone is wider.
Not a terminal and no $COLUMNS (a pipe, a script): no limit, one line per row, as before.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence

INDENT = "  "
GAP = "  "


def output_width(
    environ: Mapping[str, str] | None = None, isatty: bool | None = None
) -> int | None:
    """$COLUMNS when it is a number, else the terminal's width when stdout is one, else None
    (no limit)."""
    env = os.environ if environ is None else environ
    columns = env.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if sys.stdout.isatty() if isatty is None else isatty:
        return shutil.get_terminal_size().columns
    return None


def _groups(widths: Sequence[int], width: int) -> list[list[int]]:
    """The columns of each line of a row: the first line from column 0 while they fit, each
    next line (indented) likewise from the first column that did not."""
    groups: list[list[int]] = [[0]]
    used = widths[0]
    for i, w in enumerate(widths[1:], 1):
        if used + len(GAP) + w <= width:
            groups[-1].append(i)
            used += len(GAP) + w
        else:
            groups.append([i])
            used = len(INDENT) + w
    return groups


def fit_table(rows: Sequence[Sequence[str]], width: int | None) -> list[str]:
    """The rows (the first one the header) as aligned lines within `width` (None: no limit)."""
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    natural = sum(widths) + len(GAP) * (len(widths) - 1)
    groups = [list(range(len(widths)))] if width is None or natural <= width else None
    groups = groups or _groups(widths, width or natural)
    lines = []
    for row in rows:
        for n, group in enumerate(groups):
            text = GAP.join(row[i].ljust(widths[i]) for i in group).rstrip()
            lines.append((INDENT if n else "") + text)
    return lines
