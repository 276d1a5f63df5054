"""`trainimg build` / `trainimg wheelhouse` refuse bad input before touching an engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import REPO, RunCli

MATRIX = str(REPO / "matrix.yaml")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--build-arg", "NOEQUALS"], "expected KEY=VALUE"),
        (["--build-arg", "1BAD=x"], "expected KEY=VALUE"),
        (["--network", "none; rm -rf /"], "not a network name"),
        (["--repository", "Local/UPPER"], "not an image repository name"),
        (["--jobs", "0"], "--jobs must be at least 1"),
        (["no-such-cell"], "no cell named 'no-such-cell'"),
        (["--all", "debian12-cpu-py3.11-torch2.13.0-runtime"], "not both"),
    ],
)
def test_bad_options_exit_2(run_cli: RunCli, args: list[str], message: str) -> None:
    r = run_cli("build", "--matrix", MATRIX, "--url", "unix:///nonexistent.sock", *args)
    assert r.code == 2
    assert message in r.err
    assert "no engine answers" not in r.err  # refused before looking for an engine


def test_unreadable_lock_stops_before_the_engine(run_cli: RunCli, tmp_path: Path) -> None:
    lock = tmp_path / "lock.json"
    lock.write_text("{half a lock")
    r = run_cli(
        "build", "--matrix", MATRIX, "--url", "unix:///nonexistent.sock", "--lock", str(lock)
    )
    assert r.code == 2
    assert "unreadable" in r.err and str(lock) in r.err
    assert lock.read_text() == "{half a lock"


def test_wheelhouse_check_reports_missing(run_cli: RunCli, tmp_path: Path) -> None:
    (tmp_path / "wh").mkdir()
    r = run_cli("wheelhouse", "--matrix", MATRIX, "--dest", str(tmp_path / "wh"), "--check")
    assert r.code == 1
    assert "torch==2.13.0+cpu" in r.err


def test_a_cu128_cell_whose_pypi_torch_is_not_cu128_is_refused(
    run_cli: RunCli, tmp_path: Path
) -> None:
    text = Path(MATRIX).read_text()
    group = text.index("- name: offline-cu128")
    edited = text[:group] + text[group:].replace("torch: [2.9.1]", "torch: [2.11.0]", 1)
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(edited)
    cell = "debian12-cu128-py3.11-torch2.11.0-runtime"
    for args in (
        ["build", cell, "--url", "unix:///nonexistent.sock"],
        ["wheelhouse", cell, "--dest", str(tmp_path / "wh"), "--offline"],
    ):
        r = run_cli(*args, "--matrix", str(matrix))
        assert r.code == 2, r.err
        assert f"cell {cell}" in r.err and "groups[2].axes.torch" in r.err
        assert "torch 2.11.0 on PyPI is the cu130 build, not cu128" in r.err
        assert "2.8, 2.9, 2.10" in r.err and "Traceback" not in r.err
        assert "no engine answers" not in r.err
    assert not (tmp_path / "wh").exists()
