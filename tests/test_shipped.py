"""The shipped matrix.yaml and the committed images/: valid, up to date, hadolint-clean."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from builder.judgement.matrix import check_cell
from builder.judgement.severity import BLOCK
from builder.render import drift, render_all
from builder.workspace import open_workspace

REPO = Path(__file__).resolve().parent.parent
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


@pytest.mark.parametrize("path", _containerfiles(), ids=lambda p: p.parent.name + "/" + p.name)
def test_hadolint_clean(path: Path) -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    proc = subprocess.run(
        [hadolint, "--config", str(REPO / ".hadolint.yaml"), str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
