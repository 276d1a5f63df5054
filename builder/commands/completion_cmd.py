"""`trainimg completion bash|zsh|fish`: a shell completion script, and `trainimg completion
--complete -- WORD...`, which the scripts call: the candidates for the last WORD, one a line.

The candidates come from the parser itself, so they never drift from --help: command names;
the chosen command's options (and `matrix`'s own subcommands); an option's choices; and, where
a command takes a CELL, the cells of the matrix (--matrix among the words, else matrix.yaml
here or above). No candidate: the script falls back to the shell's file completion.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Sequence
from typing import Any

from builder.errors import TrainimgError
from builder.host.shown import shown

SHELLS = ("bash", "zsh", "fish")

BASH = """\
# trainimg completion for bash: eval "$(trainimg completion bash)" (e.g. in ~/.bashrc)
_trainimg() {
    local IFS=$'\\n'
    COMPREPLY=($(trainimg completion --complete -- "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
}
complete -o default -F _trainimg trainimg
"""
ZSH = """\
#compdef trainimg
# trainimg completion for zsh: eval "$(trainimg completion zsh)" (after compinit)
_trainimg() {
    local -a reply
    reply=("${(@f)$(trainimg completion --complete -- "${(@)words[2,CURRENT]}" 2>/dev/null)}")
    if [[ -n "${reply[1]}" ]]; then compadd -Q -a reply; else _files; fi
}
compdef _trainimg trainimg
"""
FISH = """\
# trainimg completion for fish: trainimg completion fish | source
function __trainimg_complete
    set -l words (commandline -opc) (commandline -ct)
    trainimg completion --complete -- $words[2..-1] 2>/dev/null
end
complete -c trainimg -a '(__trainimg_complete)'
"""
SCRIPTS = {"bash": BASH, "zsh": ZSH, "fish": FISH}


def register(sub: Any) -> None:
    p = sub.add_parser(
        "completion",
        description=(
            "Print the completion script of SHELL (bash, zsh or fish): commands, their flags, "
            'option choices and cell names. Use: eval "$(trainimg completion bash)" in '
            '~/.bashrc, eval "$(trainimg completion zsh)" in ~/.zshrc (after compinit), '
            "`trainimg completion fish | source` in config.fish. Exit codes: 0, 2 bad input."
        ),
    )
    p.add_argument(
        "--complete",
        action="store_true",
        help="(for the scripts) print the candidates for the last of the words after --",
    )
    p.add_argument("shell", nargs=argparse.REMAINDER, metavar="bash|zsh|fish")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    words = list(args.shell)
    if args.complete:
        words = words[1:] if words[:1] == ["--"] else words
        for candidate in candidates(words or [""]):
            print(candidate)
        return 0
    if len(words) != 1 or words[0] not in SHELLS:
        said = " ".join(shown(w) for w in words) or "nothing"
        raise TrainimgError(f"completion: {said}: name one shell: {', '.join(SHELLS)}")
    sys.stdout.write(SCRIPTS[words[0]])
    return 0


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser | None = action.choices.get(name)
            return found
    return None


def _subcommands(parser: argparse.ArgumentParser) -> list[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    return []


def candidates(words: Sequence[str]) -> list[str]:
    """What may stand in place of the last of `words` (the words after `trainimg`)."""
    from builder.cli import COMMANDS, build_parser

    *before, current = words
    done = [w for w in before if not w.startswith("-")]
    if not done:
        pool = ["--help", "--version"] if current.startswith("-") else list(COMMANDS)
        return [w for w in pool if w.startswith(current)]
    parser: argparse.ArgumentParser | None = build_parser([done[0]])
    for name in done:  # walk down: trainimg matrix explain ...
        inner = _subparser(parser, name) if parser is not None else None
        if inner is None:
            break
        parser = inner
    if parser is None:
        return []
    options = {o: a for a in parser._actions for o in a.option_strings}
    previous = options.get(before[-1]) if before else None
    optional_value = previous is not None and previous.nargs == "?"  # --json [FILE|-]
    if previous is not None and previous.nargs != 0 and not (optional_value and current[:1] == "-"):
        pool = [str(c) for c in previous.choices or ()]  # none: the shell completes files
    elif current.startswith("-"):
        pool = sorted(o for o in options if o.startswith("--")) or list(options)
    else:
        pool = _subcommands(parser) or (_cells(before) if _takes_cells(parser) else [])
    return [w for w in pool if w.startswith(current)]


def _takes_cells(parser: argparse.ArgumentParser) -> bool:
    return any(
        not a.option_strings and "CELL" in str(a.metavar or a.dest).upper() for a in parser._actions
    )


def _cells(words: Sequence[str]) -> list[str]:
    from builder.workspace import DEFAULT_MATRIX, open_workspace

    matrix = DEFAULT_MATRIX
    for flag, value in itertools.pairwise(words):
        if flag == "--matrix":
            matrix = value
    try:
        return [c.name for c in open_workspace(matrix, strict=False).cells]
    except (TrainimgError, OSError):
        return []
