"""A command pays only for what it imports (builder/cli.py): `trainimg --help` imports no
command module, and the commands people call in loops (matrix list/explain, compat) import
none of the heavy packages. Each case runs in a fresh interpreter, as the console script does;
the times themselves are benchmarks/startup.py's."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from builder import cli

REPO = Path(__file__).resolve().parents[2]
COMMAND_MODULES = REPO / "builder" / "commands"
# Seconds to import, or a payload the host toolkit never needs to parse a command line.
HEAVY = frozenset(
    {
        "torch",
        "torchao",
        "numpy",
        "matplotlib",
        "trainer",
        "pytest",
        "_pytest",
        "hypothesis",
        "testinfra",
        "docker",
        "podman",
        "requests",
        "urllib3",
        "rich",
        "pygments",
        "jinja2",
    }
)
CELL = "debian12-cpu-py3.11-torch2.13.0-runtime"


def modules_after(argv: list[str] | None) -> set[str]:
    """sys.modules of a fresh interpreter after `import builder.cli` (and, given argv, after
    building the parser for argv)."""
    build = "" if argv is None else f"cli.build_parser({argv!r})"
    code = f"import json, sys\nfrom builder import cli\n{build}\nprint(json.dumps([*sys.modules]))"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout))


def top_level(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_importing_the_cli_imports_no_command_and_nothing_heavy() -> None:
    loaded = modules_after(None)
    assert top_level(loaded) & HEAVY == set()
    assert {m for m in loaded if m.startswith("builder.")} <= {"builder.cli", "builder.errors"}


def test_the_command_list_imports_no_command_module() -> None:
    loaded = modules_after(["--help"])
    assert {m for m in loaded if m.startswith("builder.")} <= {"builder.cli", "builder.errors"}


@pytest.mark.parametrize(
    "argv",
    [["matrix", "explain", CELL], ["compat", CELL, "--driver", "580.65.06"]],  # list: as explain
    ids=lambda argv: " ".join(argv[:2]),
)
def test_commands_called_in_loops_import_nothing_heavy(argv: list[str]) -> None:
    loaded = modules_after(argv)
    assert f"builder.commands.{argv[0]}_cmd" in loaded  # the case did build that command
    assert top_level(loaded) & HEAVY == set()


def test_each_command_builds_only_its_own_module() -> None:
    loaded = modules_after(["build", "--help"])
    commands = {m for m in loaded if m.startswith("builder.commands.") and m.endswith("_cmd")}
    assert commands == {"builder.commands.build_cmd"}


def test_every_command_module_is_listed_and_every_listed_command_has_one() -> None:
    modules = {p.stem.removesuffix("_cmd") for p in COMMAND_MODULES.glob("*_cmd.py")}
    assert modules == set(cli.COMMANDS)


def test_the_light_command_list_is_the_full_parsers() -> None:
    """`trainimg --help` from the table reads exactly as with every command registered: each
    module registers the name it is listed under, with the table's help line."""
    assert cli.build_parser(["--help"]).format_help() == cli.build_parser().format_help()


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_each_command_parses_its_own_help(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.build_parser([name, "--help"]).parse_args([name, "--help"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: trainimg {name} ")


def test_a_command_module_that_gives_its_own_help_line_is_refused() -> None:
    sub = argparse.ArgumentParser().add_subparsers()
    with pytest.raises(TypeError, match="help"):
        cli._OneCommand(sub, "the table's line").add_parser("x", help="its own line")


def test_an_unknown_command_names_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["matirx", "list"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'matirx'" in err and "'matrix'" in err


def test_matrix_list_loads_no_rule_module() -> None:
    """Listing judges nothing, so it does not import the rules (`matrix check` does)."""
    code = (
        "import contextlib, io, json, sys\nfrom builder import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = cli.main(['matrix', 'list'])\n"
        "print(json.dumps([code, *sys.modules]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    exit_code, *loaded = json.loads(proc.stdout)
    assert exit_code == 0
    assert "builder.commands.matrix_cmd" in loaded
    assert not [m for m in loaded if m.startswith("builder.judgement.matrix")]
