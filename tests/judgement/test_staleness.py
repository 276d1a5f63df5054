"""matrix.stale: a matrix whose newest torch lags the releases with a build for its CUDA line
is warned about, by a configurable number of minors; so is a facts data file read long ago."""

from __future__ import annotations

import datetime as dt

from builder.judgement.matrix import StaleLimits, check_cells
from builder.workspace import open_workspace
from tests.conftest import REPO

DAY = dt.date(2026, 12, 3)
CU128_ONLY = REPO / "tests" / "preflight" / "matrix_cu128" / "matrix.yaml"  # newest CUDA torch 2.11


def _messages(matrix: object, today: dt.date, limits: StaleLimits) -> list[str]:
    ws = open_workspace(str(matrix), today, strict=False)
    return [f.message for _, f in check_cells(ws.cells, today, limits)]


def test_a_matrix_whose_newest_cuda_torch_is_2_11_is_stale() -> None:
    msgs = _messages(CU128_ONLY, DAY, StaleLimits())
    assert msgs == [
        "the matrix's newest CUDA torch is 2.11.0, 4 minors behind torch 2.15.0 (cu132 on PyPI; "
        "more than 2, --stale-minors)"
    ]
    assert _messages(CU128_ONLY, DAY, StaleLimits(minors=4)) == []  # the limit is the user's


def test_the_matrix_with_the_cuda_13_lines_keeps_up() -> None:
    assert _messages(REPO / "matrix.yaml", DAY, StaleLimits()) == []


def test_a_line_behind_its_own_newest_release_is_named() -> None:
    msgs = _messages(REPO / "matrix.yaml", DAY, StaleLimits(minors=0))
    assert not any("cu130 cell" in m for m in msgs)  # 2.14.1 is the newest cu130 release
    assert "the newest cpu cell's torch 2.13.0 is 2 minors behind torch 2.15.0" in " ".join(msgs)


def test_facts_read_long_ago_are_stale() -> None:
    later = DAY + dt.timedelta(days=91)
    msgs = _messages(REPO / "matrix.yaml", later, StaleLimits())
    assert any(m.startswith("torch_pypi.json was read from its source 91 days ago") for m in msgs)
    assert _messages(REPO / "matrix.yaml", later, StaleLimits(days=91)) == []
