"""`trainimg completion`: the candidates come from the parser (commands, flags, choices,
`matrix`'s subcommands) and the matrix (cell names, from a prefix); the bash script, sourced
in a real bash, completes a cell name from a prefix through the installed `trainimg`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from builder.cli import COMMANDS, main
from builder.commands.completion_cmd import SCRIPTS, candidates
from tests.conftest import REPO

CPU = "debian12-cpu-py3.11-torch2.13.0-runtime"
M = ["--matrix", str(REPO / "matrix.yaml")]


def test_commands_flags_and_choices() -> None:
    assert candidates([""]) == list(COMMANDS)
    assert candidates(["pr"]) == ["preflight", "prune"]
    flags = candidates(["build", "--"])
    assert {"--wheelhouse", "--engine", "--all"} <= set(flags) and "-h" not in flags
    assert candidates(["build", "--engine", ""]) == ["podman", "docker"]
    assert candidates(["verify", "--gpus", "o"]) == ["on", "off"]
    assert candidates(["verify", "--gpus", "a"]) == ["auto", "all"]
    assert candidates(["matrix", "e"]) == ["explain"]
    assert candidates(["build", "--wheelhouse", ""]) == []  # a path: the shell's files
    assert candidates(["diff", ""]) == []  # images, not cells
    # --json [FILE|-]: its value is a file (the shell's), or the next option
    assert candidates(["matrix", "list", "--json", ""]) == []
    assert candidates(["matrix", "list", "--json", "--a"]) == ["--all"]


def test_cell_names_from_a_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    assert candidates(["build", *M, CPU[:-3]]) == [CPU]
    rocky = candidates(["matrix", "explain", *M, "rocky9-"])
    assert rocky and all(n.startswith("rocky9-") for n in rocky)
    monkeypatch.chdir(REPO / "images")  # matrix.yaml from above
    assert candidates(["push", CPU[:-3]]) == [CPU]


def test_scripts_and_bad_shell(capsys: pytest.CaptureFixture[str]) -> None:
    for shell, script in SCRIPTS.items():
        assert main(["completion", shell]) == 0
        out = capsys.readouterr().out
        assert out == script and "trainimg completion --complete --" in out
    assert main(["completion", "tcsh"]) == 2
    assert "tcsh: name one shell: bash, zsh, fish" in capsys.readouterr().err


@pytest.mark.integration
def test_bash_completes_a_cell_name() -> None:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    script = (
        'source <(trainimg completion bash); COMP_WORDS=(trainimg build "$1"); COMP_CWORD=2; '
        '_trainimg; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.run(
        [bash, "-c", script, "bash", CPU[:-4]],
        cwd=REPO / "trainer",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [CPU]
