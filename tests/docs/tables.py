"""The ids a docs page's table lists, so a test can hold the table to the check registry."""

from __future__ import annotations

import re
from pathlib import Path

_CODE = re.compile(r"`([^`]+)`")


def first_column_ids(page: Path, header: str) -> list[str]:
    """The `code` names in the first column of the table whose header row starts `| header |`,
    in row order (a row may name several, e.g. `train_bf16`, `train_fp8_fwd`)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    start = next(
        (i for i, ln in enumerate(lines) if re.match(rf"\|\s*{re.escape(header)}\s*\|", ln)),
        None,
    )
    assert start is not None, f"{page}: no table with header {header!r}"
    ids: list[str] = []
    for line in lines[start + 2 :]:  # after the header and the |---| row
        if not line.startswith("|"):
            break
        ids += _CODE.findall(line.split("|")[1])
    return ids
