"""The text report in an 80-column terminal: every line within the width (but a single word
wider than it), every fix whole, and --verbose's image table laid out under each image instead
of past the edge; a pipe (no terminal, no $COLUMNS) keeps the 100-column text and the aligned
table."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from builder.cli import main
from tests.preflight.conftest import PREFLIGHT_MATRIX
from tests.preflight.fakehost import FIXTURES

HOSTS = ("el9-h100", "el9-v100-r535", "el9-h200-fm-mismatch", "el9-b200-proprietary", "el9-geforce")


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    for name in HOSTS:
        shutil.copytree(FIXTURES / name, tmp_path / "fleet" / name)
    return tmp_path / "fleet"


def _report(capsys: pytest.CaptureFixture[str], fleet: Path, *extra: str) -> list[str]:
    main(["preflight", "--matrix", str(PREFLIGHT_MATRIX), "--from", str(fleet),
          "--target-driver", "580.65.06", *extra])  # fmt: skip
    return capsys.readouterr().out.splitlines()


def _fixes(lines: list[str]) -> list[str]:
    """Each fix as one string: its `fix:` line and the lines wrapped under it."""
    out = []
    for i, line in enumerate(lines):
        if "fix: " not in line:
            continue
        column = line.index("fix: ") + len("fix: ")
        words = [line[column:]]
        for more in lines[i + 1 :]:
            if not more.strip() or len(more) - len(more.lstrip()) < column:
                break
            words.append(more.strip())
        out.append(" ".join(" ".join(words).split()))
    return out


def _too_wide(lines: list[str], width: int) -> list[str]:
    return [line for line in lines if len(line) > width and len(line.split()) > 1]


@pytest.mark.parametrize("verbose", [(), ("--verbose",)], ids=["fleet", "verbose"])
def test_every_line_fits_80_columns_and_no_fix_is_cut(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fleet: Path,
    verbose: tuple[str, ...],
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    wide = _report(capsys, fleet, *verbose)
    monkeypatch.setenv("COLUMNS", "80")
    narrow = _report(capsys, fleet, *verbose)
    assert _too_wide(narrow, 80) == []
    assert _too_wide(wide, 80), "the fixture fleet no longer needs more than 80 columns"
    assert _fixes(wide) and _fixes(narrow) == _fixes(wide)  # every fix, every word, in order
    assert narrow[-1].startswith(f"{len(HOSTS)} host(s): ")  # the count line stays last


def test_a_pipe_keeps_the_aligned_image_table(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, fleet: Path
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    lines = _report(capsys, fleet, "--verbose")
    assert any(line.lstrip().startswith("IMAGE ") for line in lines)
    monkeypatch.setenv("COLUMNS", "80")
    narrow = _report(capsys, fleet, "--verbose")
    assert not any(line.lstrip().startswith("IMAGE ") for line in narrow)
    assert any(line.lstrip().startswith("source: ") for line in narrow)
