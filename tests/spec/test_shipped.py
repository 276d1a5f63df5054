"""The shipped matrix.yaml and the committed images/: valid, up to date, hadolint-clean."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from builder.judgement.matrix import check_cell
from builder.judgement.severity import BLOCK
from builder.spec.render import drift, render_all
from builder.workspace import open_workspace
from tests.quick_mode import QUICK

REPO = Path(__file__).resolve().parents[2]
WS = open_workspace(REPO / "matrix.yaml")


def test_shipped_matrix_has_no_rule_errors() -> None:
    errors = [(c.name, f) for c in WS.cells for f in check_cell(c, WS.today) if f.severity is BLOCK]
    assert errors == []


def test_shipped_matrix_covers_the_mission() -> None:
    oses = {c.os.distro.key for c in WS.cells}
    assert {"centos-stream9", "ubi9", "rocky9", "debian12"} <= oses
    torches = {c.torch.public for c in WS.cells if c.cuda}
    assert {"2.8.0", "2.9.1", "2.10.0", "2.11.0"} <= torches
    assert {c.flavour for c in WS.cells} == {"runtime", "devel"}
    assert WS.cell(WS.matrix.project.default_cell).accelerator == "cpu"


def test_committed_containerfiles_are_up_to_date() -> None:
    d = drift(WS.root, render_all(WS.root, WS.cells, WS.matrix.project))
    assert d.clean, (
        f"run `trainimg render`: missing {d.missing} changed {d.changed} stale {d.stale}"
    )


def _containerfiles() -> list[Path]:
    return sorted(REPO.glob("images/*/Containerfile")) + sorted(
        (REPO / "tests" / "data" / "golden").glob("*.Containerfile")
    )


def _hadolint_bin() -> str:
    return shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")


def _hadolint(paths: list[Path]) -> list[dict[str, object]]:
    """hadolint's findings on `paths`, in one run (one process for every file: its start-up is
    most of its cost); a run that gives no JSON findings list fails the test, naming why."""
    proc = subprocess.run(
        [_hadolint_bin(), "--config", str(REPO / ".hadolint.yaml"), "--format", "json"]
        + [str(p) for p in paths],
        capture_output=True,
        text=True,
        timeout=120,
    )
    try:
        findings = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"hadolint exit {proc.returncode}, no JSON: {proc.stdout}{proc.stderr}")
    assert isinstance(findings, list), proc.stdout
    assert (proc.returncode == 0) == (findings == []), proc.stdout + proc.stderr
    return findings


def _where(finding: dict[str, object]) -> str:
    path = Path(str(finding["file"]))
    name = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    return f"{name}:{finding['line']}: {finding['code']} {finding['level']}: {finding['message']}"


HADOLINT_CLEAN = REPO / ".cache" / "hadolint-clean"  # the quick run's record of clean files


def _clean_key(path: Path, tool: str) -> str:
    """What hadolint's verdict on `path` depends on: its text, the config and hadolint itself
    (`tool`: the config's hash and the binary's path, size and mtime)."""
    return hashlib.sha256(path.read_bytes() + tool.encode()).hexdigest()


def _tool_key() -> str:
    binary = Path(_hadolint_bin()).resolve()
    st = binary.stat()
    config = hashlib.sha256((REPO / ".hadolint.yaml").read_bytes()).hexdigest()
    return f"{config} {binary} {st.st_size} {st.st_mtime_ns}"


def test_hadolint_clean() -> None:
    """Every Containerfile, in one hadolint run. The quick run (tests/quick_mode.py) lints only
    those whose text, config or hadolint changed since it last found them clean (~0.4 CPU-s a
    file); the full run lints them all."""
    paths = _containerfiles()
    assert len(paths) > 20  # every rendered cell and every golden file
    tool = _tool_key()
    keys = {p: _clean_key(p, tool) for p in paths}
    todo = [p for p in paths if not (QUICK and (HADOLINT_CLEAN / keys[p]).exists())]
    findings = [_where(f) for f in _hadolint(todo)] if todo else []
    assert findings == []
    if QUICK:
        HADOLINT_CLEAN.mkdir(parents=True, exist_ok=True)
        for p in todo:
            (HADOLINT_CLEAN / keys[p]).write_text(f"{p.relative_to(REPO)}\n", encoding="utf-8")


def test_hadolint_names_the_file_and_line_of_each_finding(tmp_path: Path) -> None:
    bad = tmp_path / "Containerfile"
    bad.write_text("FROM debian\nRUN apt-get install -y curl\n", encoding="utf-8")
    where = [_where(f) for f in _hadolint([_containerfiles()[0], bad])]
    assert where and all(w.startswith(f"{bad}:") for w in where), where
    assert any(w.startswith(f"{bad}:1: DL3006 ") for w in where), where
    assert any(w.startswith(f"{bad}:2: DL3008 ") for w in where), where
