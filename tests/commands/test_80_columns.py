"""Output that fits an 80-column terminal (COLUMNS=80, as a tmux pane of 80x40 sets it):
`matrix list` with every cell name whole, and every command's --help wrapped between words
(argparse's default formatter breaks `--no-index` and cell names at their hyphens). The build
summary's table: tests/build/test_keep_going.py."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

import pytest

from builder.cli import build_parser, main
from builder.commands.columns import fit_table, output_width
from builder.workspace import open_workspace
from tests.helpers import REPO


def test_matrix_list_fits_80_columns_and_cuts_no_cell_name(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["matrix", "list", "--all", "--matrix", str(REPO / "matrix.yaml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 80
    ws = open_workspace(REPO / "matrix.yaml")
    firsts = [line.split()[0] for line in lines if line and not line.startswith(" ")]
    names = [c.name for c in ws.cells] + [e.name for e in ws.expansion.excluded]
    assert [f for f in firsts if f not in ("CELL", "EXCLUDED")][: len(names)] == names
    (row,) = [i for i, line in enumerate(lines) if line.startswith(ws.cells[-1].name + " ")]
    assert lines[row + 1].split()[-1] == ws.cells[-1].cell_hash  # moved under its cell
    assert "cu130" in lines[row]  # the accelerator is the torch build's, not always cu128


def test_a_table_that_fits_is_one_line_per_row_and_one_that_does_not_moves_columns() -> None:
    rows = [["NAME", "A", "B"], ["x" * 30, "a" * 20, "b" * 20]]
    assert fit_table(rows, None) == ["NAME" + " " * 28 + "A" + " " * 21 + "B",
                                     "x" * 30 + "  " + "a" * 20 + "  " + "b" * 20]  # fmt: skip
    assert fit_table(rows, 60) == ["NAME" + " " * 28 + "A", "  B",
                                   "x" * 30 + "  " + "a" * 20, "  " + "b" * 20]  # fmt: skip
    assert output_width({"COLUMNS": "80"}, isatty=False) == 80
    assert output_width({}, isatty=False) is None  # a pipe: no limit, as before
    assert output_width({"COLUMNS": "wide"}, isatty=False) is None


def _parsers(parser: argparse.ArgumentParser, name: str) -> Iterator[tuple[str, Any]]:
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def test_every_help_fits_80_columns_and_breaks_no_word(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    # CI checks out under a longer path than a laptop: no help may print this machine's paths
    deep = "/" + "/".join(["a-checkout-directory-deeper-than-this-one"] * 3)
    for var in ("XDG_CONFIG_HOME", "HOME", "TRAINIMG_CACHE", "TRAINIMG_WHEELHOUSE"):
        monkeypatch.setenv(var, deep)
    helps = dict(_parsers(build_parser(None), "trainimg"))
    assert {"trainimg build", "trainimg matrix list", "trainimg config show"} <= set(helps)
    for name, parser in helps.items():
        text = parser.format_help()
        too_long = [line for line in text.splitlines() if len(line) > 80]
        assert too_long == [], name
        words = " ".join(text.split())
        for action in parser._actions:
            if action.help and "%" not in action.help:  # as written, only rewrapped
                assert " ".join(action.help.split()) in words, (name, action.dest)
        if parser.formatter_class.__name__ == "HelpFormatter" and parser.description:
            assert " ".join(parser.description.split()) in words, name
