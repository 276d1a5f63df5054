"""Choosing cells (builder/workspace.py): a typo gets "did you mean" by edit distance, a glob
('rocky9-*') selects every cell it matches on the commands that take cells, and matrix.yaml is
found from any directory below it. On this project's matrix, in this process."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from builder.cli import main
from builder.errors import TrainimgError
from builder.workspace import Workspace, closest, edit_distance, find_matrix, open_workspace
from tests.conftest import REPO

CPU = "debian12-cpu-py3.11-torch2.13.0-runtime"


@pytest.fixture(scope="module")
def ws() -> Workspace:
    return open_workspace(REPO / "matrix.yaml", strict=False)


def test_edit_distance() -> None:
    assert edit_distance("runtim", "runtime") == 1
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance("", "abc") == 3 and edit_distance("same", "same") == 0


def test_a_typo_gets_the_nearest_cells(ws: Workspace) -> None:
    names = [c.name for c in ws.cells]
    assert closest(CPU[:-1], names) == [CPU]  # one letter short: only the one cell
    assert closest("debian12-cpu-py3.11-torch2.13.0-runtmie", names) == [CPU]  # a swap
    assert closest("zzz", names) == []  # nothing near: no guess
    with pytest.raises(TrainimgError, match=rf"did you mean {CPU}\?$"):
        ws.cell(CPU.replace("py3.11", "py3.1"))
    with pytest.raises(TrainimgError, match=r"cells: .* and \d+ more \(`trainimg matrix list`"):
        ws.cell("zzz")


def test_globs_select_every_matching_cell_once(ws: Workspace) -> None:
    rocky = [c.name for c in ws.cells if c.name.startswith("rocky9-")]
    assert len(rocky) >= 2
    assert [c.name for c in ws.select(["rocky9-*"])] == rocky
    both = ws.select(["rocky9-*", rocky[0], "debian12-cpu-*-runtime"])
    assert [c.name for c in both] == [*rocky, CPU]  # in order, each once
    with pytest.raises(TrainimgError, match=r"'rocky8-\*' matches no cell .* did you mean "
                                            r"'rocky9-\*'( or 'rocky10\*')?\?"):  # fmt: skip
        ws.select(["rocky8-*"])


def test_commands_take_globs_and_suggest(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    m = ["--matrix", str(REPO / "matrix.yaml")]
    dest = ["--dest", str(tmp_path / "none")]
    assert main(["wheelhouse", "--check", "debian12-cpu-*", *m, *dest]) == 1
    err = capsys.readouterr().err
    assert f"{CPU}: cell {CPU}: wheelhouse" in err  # the glob chose the CPU cells
    assert main(["wheelhouse", "--check", "debian13-*", *m, *dest]) == 2
    assert "did you mean 'debian12-*'?" in capsys.readouterr().err
    assert main(["matrix", "explain", CPU[:-1], *m]) == 2
    assert f"did you mean {CPU}?" in capsys.readouterr().err
    # a cell's typo where an image may be named: not taken for an image reference
    assert main(["export", CPU[:-1], "-o", str(tmp_path / "x.tar"), *m]) == 2
    err = capsys.readouterr().err
    assert f"did you mean {CPU}?" in err and not (tmp_path / "x.tar").exists()


def test_matrix_is_found_from_a_subdirectory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    (project / "images" / "deep").mkdir(parents=True)
    shutil.copy(REPO / "matrix.yaml", project / "matrix.yaml")
    monkeypatch.delenv("TRAINIMG_MATRIX", raising=False)
    monkeypatch.chdir(project / "images" / "deep")
    assert find_matrix() == project / "matrix.yaml"
    assert main(["matrix", "list"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].endswith("excluded")
    monkeypatch.chdir(tmp_path)
    assert find_matrix() is None or find_matrix() != project / "matrix.yaml"
