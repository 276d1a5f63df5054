"""The wheelhouse: which wheels a cell needs, the hash check, and filling one (pip faked)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from packaging.tags import Tag

from builder.matrix.model import Cell, Project
from builder.wheelhouse import (
    LOCK_NAME,
    WheelhouseError,
    fill,
    read_lock,
    requirements,
    select,
    sha256_file,
    supported_tags,
    write_lock,
)
from builder.workspace import Workspace, open_workspace
from tests.build.helpers import CPU_CELL, REPO

# The files the default CPU cell needs (names as PyPI / the PyTorch index ship them).
CPU_WHEELS = (
    "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
    "torchao-0.18.0-cp310-abi3-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
    "filelock-3.20.0-py3-none-any.whl",
    "fsspec-2025.10.0-py3-none-any.whl",
    "jinja2-3.1.6-py3-none-any.whl",
    "markupsafe-3.0.3-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64.whl",
    "mpmath-1.3.0-py3-none-any.whl",
    "networkx-3.5-py3-none-any.whl",
    "numpy-2.3.5-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
    "pyyaml-6.0.3-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64.whl",
    "setuptools-80.9.0-py3-none-any.whl",
    "sympy-1.14.0-py3-none-any.whl",
    "typing_extensions-4.15.0-py3-none-any.whl",
)


@pytest.fixture(scope="module")
def ws() -> Workspace:
    return open_workspace(REPO / "matrix.yaml")


@pytest.fixture(scope="module")
def cell(ws: Workspace) -> Cell:
    return ws.cell(CPU_CELL)


@pytest.fixture(scope="module")
def project(ws: Workspace) -> Project:
    return ws.matrix.project


def fake_wheels(directory: Path, names: tuple[str, ...] = CPU_WHEELS) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / name).write_bytes(f"fake wheel {name}".encode())
    return directory


def test_requirements_are_the_containerfile_pins(cell: Cell, project: Project) -> None:
    reqs = [str(r) for r in requirements(cell, project)]
    assert reqs[:2] == ["torch==2.13.0+cpu", "torchao==0.18.0"]
    text = (REPO / "images" / CPU_CELL / "Containerfile").read_text()
    for req in reqs:
        name, version = req.split("==")
        assert f"=={version}'" in text
        assert name.replace("-", "").lower() in text.replace("-", "").lower()


def test_supported_tags_follow_python_and_glibc(cell: Cell) -> None:
    tags = supported_tags(cell)
    assert Tag("cp311", "cp311", "manylinux_2_28_x86_64") in tags
    assert Tag("cp310", "abi3", "manylinux_2_24_x86_64") in tags
    assert Tag("py3", "none", "any") in tags
    assert Tag("cp311", "cp311", "manylinux_2_36_x86_64") in tags  # bookworm's glibc
    assert Tag("cp311", "cp311", "manylinux_2_39_x86_64") not in tags  # newer than bookworm
    assert Tag("cp312", "cp312", "manylinux_2_28_x86_64") not in tags
    assert Tag("cp311", "cp311", "manylinux_2_28_aarch64") not in tags


def test_select_takes_only_what_the_cell_needs(
    tmp_path: Path, cell: Cell, project: Project
) -> None:
    wh = fake_wheels(tmp_path / "wh")
    extra = (
        "numpy-2.3.4-cp311-cp311-manylinux_2_28_x86_64.whl",  # another version
        "numpy-2.3.5-cp312-cp312-manylinux_2_28_x86_64.whl",  # another python
        "rich-13.0.0-py3-none-any.whl",  # not pinned
    )
    fake_wheels(wh, extra)
    sel = select(wh, cell, project)
    assert sorted(p.name for p, _ in sel.files) == sorted(CPU_WHEELS)
    assert not sel.checked  # no lock: used, but said to be unchecked
    assert all(sha == sha256_file(p) for p, sha in sel.files)


def test_missing_wheel_is_named(tmp_path: Path, cell: Cell, project: Project) -> None:
    wh = fake_wheels(tmp_path / "wh", tuple(n for n in CPU_WHEELS if not n.startswith("numpy")))
    fake_wheels(wh, ("numpy-2.3.5-cp311-cp311-manylinux_2_39_x86_64.whl",))  # too new a glibc
    with pytest.raises(WheelhouseError) as err:
        select(wh, cell, project)
    assert "numpy==2.3.5" in str(err.value)
    assert "torch" not in str(err.value).split("needs")[1].split(";")[0]
    assert err.value.exit_code == 2


def test_hash_check_against_the_lock(tmp_path: Path, cell: Cell, project: Project) -> None:
    wh = fake_wheels(tmp_path / "wh")
    write_lock(wh, {p.name: sha256_file(p) for p in wh.glob("*.whl")})
    assert select(wh, cell, project).checked
    (wh / CPU_WHEELS[2]).write_bytes(b"tampered")
    with pytest.raises(WheelhouseError, match=r"filelock-3\.20\.0.*sha256"):
        select(wh, cell, project)


def test_wheel_missing_from_the_lock_is_refused(
    tmp_path: Path, cell: Cell, project: Project
) -> None:
    wh = fake_wheels(tmp_path / "wh")
    write_lock(wh, {p.name: sha256_file(p) for p in wh.glob("*.whl") if "sympy" not in p.name})
    with pytest.raises(WheelhouseError, match=rf"sympy.*not listed in {LOCK_NAME}"):
        select(wh, cell, project)


def test_lock_is_sha256sum_format(tmp_path: Path) -> None:
    wh = fake_wheels(tmp_path / "wh", CPU_WHEELS[:2])
    write_lock(wh, {p.name: sha256_file(p) for p in wh.glob("*.whl")})
    proc = subprocess.run(["sha256sum", "-c", LOCK_NAME], cwd=wh, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert read_lock(wh) == {p.name: sha256_file(p) for p in wh.glob("*.whl")}
    (wh / LOCK_NAME).write_text("not a lock line\n")
    with pytest.raises(WheelhouseError, match="not `<sha256>  <file>`"):
        read_lock(wh)


def test_fill_copies_local_wheels_and_downloads_the_rest(
    tmp_path: Path, cell: Cell, project: Project
) -> None:
    local = fake_wheels(tmp_path / "opt-wheels", (CPU_WHEELS[0],))
    dest = tmp_path / "wh"
    calls: list[list[str]] = []

    def fake_pip(argv: list[str]) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        fake_wheels(dest, CPU_WHEELS[1:])
        return subprocess.CompletedProcess(argv, 0, "", "")

    report = fill(dest, [cell], project, find_links=[local], run=fake_pip)
    assert report.copied == (CPU_WHEELS[0],)
    assert sorted(report.downloaded) == sorted(CPU_WHEELS[1:])
    (argv,) = calls
    assert argv[1:4] == ["-m", "pip", "download"]
    for flag in ("--no-deps", "--only-binary=:all:", "--python-version", "3.11", "any"):
        assert flag in argv
    assert "manylinux_2_28_x86_64" in argv
    assert "torch==2.13.0+cpu" not in argv  # it came from the local directory
    assert "numpy==2.3.5" in argv
    assert select(dest, cell, project).checked
    # A second fill finds everything and downloads nothing.
    again = fill(dest, [cell], project, find_links=[local], run=fake_pip)
    assert len(calls) == 1 and not again.copied and not again.downloaded


def test_fill_offline_names_what_is_missing(tmp_path: Path, cell: Cell, project: Project) -> None:
    with pytest.raises(WheelhouseError, match=r"torchao==0\.18\.0"):
        fill(tmp_path / "wh", [cell], project, find_links=[], offline=True)


def test_fill_reports_pip_failure(tmp_path: Path, cell: Cell, project: Project) -> None:
    def failing_pip(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 1, "", "ERROR: No matching distribution found")

    with pytest.raises(WheelhouseError, match="No matching distribution"):
        fill(tmp_path / "wh", [cell], project, run=failing_pip)


def test_fill_never_overwrites_a_file_that_disagrees_with_the_lock(
    tmp_path: Path, cell: Cell, project: Project
) -> None:
    wh = fake_wheels(tmp_path / "wh")
    write_lock(wh, {p.name: sha256_file(p) for p in wh.glob("*.whl")})
    (wh / CPU_WHEELS[3]).write_bytes(b"changed")
    before = (wh / LOCK_NAME).read_text()
    with pytest.raises(WheelhouseError, match="fsspec"):
        fill(wh, [cell], project, offline=True)
    assert (wh / LOCK_NAME).read_text() == before
