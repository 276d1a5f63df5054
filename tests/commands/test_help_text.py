"""Every command's --help ends with examples and exit codes (builder/commands/help_text.py, or
the command's own text), and every example is a command line the real parser takes."""

from __future__ import annotations

import contextlib
import io
import re
import shlex

import pytest

from builder.cli import COMMANDS, build_parser
from builder.commands.help_text import HELP_EXAMPLES


def _help(name: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", "80")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser([name, "--help"]).parse_args([name, "--help"])
    return out.getvalue()


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_help_has_examples_and_exit_codes_within_80_columns(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _help(name, monkeypatch)
    assert re.search(r"examples?:", text, re.IGNORECASE), name
    assert re.search(r"exit\s+codes?", text, re.IGNORECASE), name
    assert max(len(line) for line in text.splitlines()) <= 80, name
    # no flag or hyphenated word broken at its hyphen and rejoined with a space ("--target- driver")
    assert not re.search(r"[A-Za-z0-9]-\s+[a-z]", text), re.search(
        r".{20}[A-Za-z0-9]-\s+[a-z].{10}", text
    )


def _argv(line: str) -> list[str]:
    inner = re.fullmatch(r'eval "\$\((.+)\)"', line)
    words = shlex.split(inner[1] if inner else line)
    assert words[0] == "trainimg", line
    return words[1:]


@pytest.mark.parametrize(
    "line", [line for lines in HELP_EXAMPLES.values() for line in lines], ids=lambda s: s[:60]
)
def test_every_example_is_a_command_line_the_parser_takes(line: str) -> None:
    argv = _argv(line)
    args = build_parser(argv).parse_args(argv)
    assert args.command == argv[0] and callable(args.func)


def test_every_command_has_examples_of_its_own() -> None:
    assert set(HELP_EXAMPLES) | {"run", "slurm"} == set(
        COMMANDS
    )  # run, slurm: in their own epilogs
    for name, lines in HELP_EXAMPLES.items():
        assert all(_argv(line)[0] == name for line in lines), name
