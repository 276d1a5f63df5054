"""The wheelhouse: which wheels a cell needs, the hash check, and filling one (pip faked)."""

from __future__ import annotations

import io
import subprocess
import zipfile
from collections.abc import Iterable
from pathlib import Path

import pytest
from packaging.tags import Tag

from builder.build.wheelhouse import (
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
from builder.matrix.model import Cell, Project
from builder.workspace import Workspace, open_workspace
from tests.helpers import CPU_CELL, REPO

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


# What the fake wheels declare (as torch 2.13.0+cpu, jinja2 and sympy do): a closed set.
FAKE_REQUIRES = {
    "torch": (
        "filelock",
        "typing-extensions>=4.10.0",
        "setuptools>=77.0.3",
        "sympy>=1.13.3",
        "networkx>=2.5.1",
        "jinja2",
        "fsspec>=0.8.5",
        'pyyaml; extra == "pyyaml"',
        'triton==3.5.1; platform_system == "Darwin"',
    ),
    "jinja2": ("MarkupSafe>=2.0",),
    "sympy": ("mpmath<1.4,>=1.1.0",),
}


def fake_wheel_bytes(name: str, payload: bytes = b"", requires: tuple[str, ...] = ()) -> bytes:
    """A minimal real wheel (a zip with *.dist-info/METADATA) for the file name `name`."""
    dist, version = name.split("-")[:2]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        meta = ["Metadata-Version: 2.1", f"Name: {dist}", f"Version: {version}"]
        meta += [f"Requires-Dist: {r}" for r in requires]
        zf.writestr(f"{dist}-{version}.dist-info/METADATA", "\n".join(meta) + "\n")
        zf.writestr(f"{dist}/payload", payload or name.encode())
    return buf.getvalue()


def fake_wheels(directory: Path, names: tuple[str, ...] = CPU_WHEELS) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        requires = FAKE_REQUIRES.get(name.split("-")[0], ())
        (directory / name).write_bytes(fake_wheel_bytes(name, requires=requires))
    return directory


def fake_closures(directory: Path, cells: Iterable[Cell], project: Project) -> Path:
    """The CPU set, plus pure-Python fake wheels (no dependencies) for every pin of `cells`:
    enough for plans of every cell of the matrix."""
    names = {
        f"{r.name.replace('-', '_')}-{r.version}-py3-none-any.whl"
        for cell in cells
        for r in requirements(cell)
    }
    fake_wheels(directory, CPU_WHEELS)
    return fake_wheels(directory, tuple(sorted(names)))


def locked(directory: Path) -> Path:
    write_lock(directory, {p.name: sha256_file(p) for p in directory.glob("*.whl")})
    return directory


def test_requirements_are_the_containerfile_pins(cell: Cell, project: Project) -> None:
    reqs = [str(r) for r in requirements(cell)]
    assert reqs[:2] == ["torch==2.13.0+cpu", "torchao==0.18.0"]
    text = (REPO / "images" / CPU_CELL / "Containerfile").read_text()
    for req in reqs:
        assert f"#   {req}\n" in text


def test_supported_tags_follow_python_and_glibc(cell: Cell) -> None:
    tags = supported_tags(cell)
    assert Tag("cp311", "cp311", "manylinux_2_28_x86_64") in tags
    assert Tag("cp310", "abi3", "manylinux_2_24_x86_64") in tags
    assert Tag("py3", "none", "any") in tags
    assert Tag("cp311", "cp311", "manylinux_2_36_x86_64") in tags  # bookworm's glibc
    assert Tag("cp311", "cp311", "manylinux_2_39_x86_64") not in tags  # newer than bookworm
    assert Tag("cp312", "cp312", "manylinux_2_28_x86_64") not in tags
    assert Tag("cp311", "cp311", "manylinux_2_28_aarch64") not in tags


def test_select_takes_the_closure_and_only_it(tmp_path: Path, cell: Cell, project: Project) -> None:
    wh = fake_wheels(tmp_path / "wh")
    extra = (
        "numpy-2.3.4-cp311-cp311-manylinux_2_28_x86_64.whl",  # another version
        "numpy-2.3.5-cp312-cp312-manylinux_2_28_x86_64.whl",  # another python
        "rich-13.0.0-py3-none-any.whl",  # nobody needs it
        "pyyaml-7.0.0-py3-none-any.whl",  # only torch's [pyyaml] extra would; pinned 6.0.3 wins
    )
    fake_wheels(wh, extra)
    sel = select(locked(wh), cell, project)
    assert sorted(p.name for p, _ in sel.files) == sorted(CPU_WHEELS)
    assert all(sha == sha256_file(p) for p, sha in sel.files)
    assert sel.groups == ("torch", "rest")
    assert [w.name for w in sel.in_group("torch")] == ["torch"]
    req = sel.requirements_txt("rest")
    assert f"markupsafe==3.0.3 --hash=sha256:{sha256_file(wh / CPU_WHEELS[5])}" in req
    assert "torch==" not in req and "rich" not in req


def test_missing_part_of_the_closure_is_named(tmp_path: Path, cell: Cell, project: Project) -> None:
    wh = fake_wheels(tmp_path / "wh", tuple(n for n in CPU_WHEELS if "markupsafe" not in n))
    fake_wheels(wh, ("numpy-2.3.5-cp311-cp311-manylinux_2_39_x86_64.whl",))  # too new a glibc
    (wh / CPU_WHEELS[8]).unlink()  # numpy 2.3.5 for bookworm's glibc
    with pytest.raises(WheelhouseError) as err:
        select(locked(wh), cell, project)
    msg = str(err.value)
    assert f"cell {CPU_CELL}" in msg and str(wh) in msg
    assert "markupsafe==3.0.3 (needed by the cell's pins)" in msg
    assert "numpy==2.3.5 (needed by the cell's pins)" in msg
    assert "lacks 2 wheel(s)" in msg and "trainimg wheelhouse" in msg
    assert err.value.exit_code == 2


def test_a_wheelhouse_without_a_lock_is_refused(
    tmp_path: Path, cell: Cell, project: Project
) -> None:
    wh = fake_wheels(tmp_path / "wh")
    with pytest.raises(WheelhouseError, match=rf"no {LOCK_NAME}.*trainimg wheelhouse"):
        select(wh, cell, project)


def test_hash_check_against_the_lock(tmp_path: Path, cell: Cell, project: Project) -> None:
    wh = locked(fake_wheels(tmp_path / "wh"))
    select(wh, cell, project)
    name = CPU_WHEELS[2]
    (wh / name).write_bytes(fake_wheel_bytes(name, b"re-published"))  # same name, new bytes
    with pytest.raises(WheelhouseError, match=rf"cell {CPU_CELL}.*filelock-3\.20\.0.*sha256"):
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
    for flag in ("--only-binary=:all:", "--python-version", "3.11", "any"):
        assert flag in argv
    assert "--no-deps" not in argv  # pip resolves the closure for the cell's platform
    assert "manylinux_2_28_x86_64" in argv
    assert "numpy==2.3.5" in argv and "torch==2.13.0+cpu" in argv
    assert len(select(dest, cell, project).wheels) == len(CPU_WHEELS)
    # A second fill finds everything and downloads nothing.
    again = fill(dest, [cell], project, find_links=[local], run=fake_pip)
    assert len(calls) == 1 and not again.copied and not again.downloaded


def test_fill_offline_names_what_is_missing(tmp_path: Path, cell: Cell, project: Project) -> None:
    with pytest.raises(WheelhouseError, match=r"torchao==0\.18\.0"):
        fill(tmp_path / "wh", [cell], project, find_links=[], offline=True)
    # Local wheels are followed through their dependencies: torch's pull in sympy's mpmath.
    local = fake_wheels(tmp_path / "local")
    report = fill(tmp_path / "wh2", [cell], project, find_links=[local], offline=True)
    assert sorted(report.copied) == sorted(CPU_WHEELS)


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
    (wh / CPU_WHEELS[3]).write_bytes(fake_wheel_bytes(CPU_WHEELS[3], b"changed"))
    before = (wh / LOCK_NAME).read_text()
    with pytest.raises(WheelhouseError, match="fsspec"):
        fill(wh, [cell], project, offline=True)
    assert (wh / LOCK_NAME).read_text() == before


def test_the_wheelhouse_command_shows_its_steps_and_quiet_shows_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from builder.cli import main

    local = fake_wheels(tmp_path / "local")
    argv = ["wheelhouse", CPU_CELL, "--matrix", str(REPO / "matrix.yaml"), "--offline"]
    argv += ["--find-links", str(local)]
    assert main([*argv, "--dest", str(tmp_path / "a")]) == 0
    loud = capsys.readouterr()
    assert "wheelhouse: copied " in loud.err
    assert "hash the wheels: done (" in loud.err
    assert "\x1b" not in loud.err  # not a terminal: plain lines
    assert main([*argv, "--dest", str(tmp_path / "b"), "-q"]) == 0
    quiet = capsys.readouterr()
    assert quiet.err == ""
    assert quiet.out.replace(str(tmp_path / "b"), "") == loud.out.replace(str(tmp_path / "a"), "")
