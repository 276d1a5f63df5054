"""The corpus of malformed matrices: each gets exactly one clear message and exit code 2.

tests/data/malformed/expected.tsv holds, per file, the message the CLI must print ({path} is
the file's path): the file, the line and the key path where YAML gives them, never a traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.cli import main

DATA = Path(__file__).parent / "data" / "malformed"
CASES = [
    line.split("\t", 1)
    for line in (DATA / "expected.tsv").read_text(encoding="utf-8").splitlines()
    if line.strip()
]


def test_corpus_is_complete() -> None:
    files = sorted(p.name for p in DATA.glob("*.yaml"))
    assert files == sorted(name for name, _ in CASES)
    assert len(files) >= 20


@pytest.mark.parametrize(("name", "expected"), CASES, ids=[c[0] for c in CASES])
def test_malformed_matrix_message(
    name: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = DATA / name
    code = main(["matrix", "list", "--matrix", str(path), "--today", "2026-11-29"])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert "Traceback" not in err
    assert err.strip() == "trainimg: error: " + expected.replace("{path}", str(path))


@pytest.mark.parametrize("command", [["render", "--check"], ["matrix", "explain", "x"]])
def test_other_commands_refuse_malformed_matrix_too(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    path = DATA / "yaml-syntax.yaml"
    code = main([*command, "--matrix", str(path)])
    assert code == 2
    assert f"{path}:6: YAML syntax error" in capsys.readouterr().err


def test_missing_matrix_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["matrix", "list", "--matrix", str(tmp_path / "nope.yaml")])
    assert code == 2
    assert "nope.yaml: no such file" in capsys.readouterr().err
