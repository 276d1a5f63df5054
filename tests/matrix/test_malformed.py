"""The corpus of malformed matrices: each gets exactly one clear message and exit code 2.

tests/data/malformed/expected.tsv holds, per file, the message the CLI must print ({path} is
the file's path): the file, the line and the key path where YAML gives them, never a traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from builder.cli import main
from builder.errors import MatrixError
from builder.matrix import yamlnodes

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "malformed"
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
    code = main(["render", "--check", "--matrix", str(path), "--today", "2026-11-29"])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert "Traceback" not in err
    assert err.strip() == "trainimg: error: " + expected.replace("{path}", str(path))


@pytest.mark.parametrize("command", [["matrix", "list"], ["matrix", "explain", "x"]])
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


@pytest.mark.parametrize(
    "path", [REPO / "matrix.yaml", *sorted(DATA.glob("*.yaml"))], ids=lambda p: p.name
)
def test_libyaml_and_pure_python_give_the_same_tree_lines_and_messages(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """yamlnodes composes with libyaml where PyYAML has it: the tree, every key's line and
    every error message are those of PyYAML's own loader."""
    assert yamlnodes._FAST_LOADER is getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    text = path.read_text(encoding="utf-8")

    def outcome() -> object:
        try:
            return yamlnodes.load(text, path.name)
        except MatrixError as exc:
            return str(exc)

    fast = outcome()
    monkeypatch.setattr(yamlnodes, "_FAST_LOADER", yaml.SafeLoader)
    assert fast == outcome()


def test_matrix_list_lists_a_blocked_cell_without_judging_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listing runs no rule (they are `matrix check`'s): the blocked cell is listed, exit 0;
    the commands that render or build refuse it (the corpus above, through render)."""
    import builder.judgement.matrix

    def judged(*_: object) -> None:
        raise AssertionError("matrix list ran the rules")

    monkeypatch.setattr(builder.judgement.matrix, "first_error", judged)
    path = DATA / "cuda-driver-cannot-run.yaml"
    code = main(["matrix", "list", "--matrix", str(path), "--today", "2026-11-29"])
    assert code == 0
    assert "rocky9-cu128-py3.12-torch2.9.1-runtime" in capsys.readouterr().out
    monkeypatch.undo()
    assert main(["build", "--matrix", str(path), "rocky9-cu128-py3.12-torch2.9.1-runtime"]) == 2
    assert "[cuda.driver]" in capsys.readouterr().err
