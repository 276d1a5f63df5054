"""The `trainimg` front: builds the parser, calls the chosen command, turns what escapes it
into an exit code.

Each command `NAME` is a module, builder/commands/NAME_cmd.py, with `register(sub)`, which adds
the command's subparser (`sub.add_parser("NAME", ...)`, without help=) and sets `func` to the
function that runs it (`run(args) -> int`); what a command does - checking its options,
choosing cells, talking to an engine - lives in that run (e.g. builder.commands.build_cmd.run),
never here.

A command's module is imported only when that command runs (or its --help is asked for):
COMMANDS below holds every name with its one-line help, so `trainimg --help` lists them all
without importing one, and `trainimg matrix list` never pays for verify's pytest or the engine
SDKs. Adding a command is its module plus one line in COMMANDS; the module imports what it uses
at its top, as any module does. tests/commands/test_cli_startup.py holds this; benchmarks/startup.py
times the whole process.

This module only maps what escapes a run: a TrainimgError to its own exit code, Ctrl-C to 130,
a reader of stdout that went away (`trainimg ... | head`) to 141, and an OSError (a full
disk, a place not writable, a file that exists) or an engine SDK's or requests' error to one
`trainimg: error: <what>: <why>` line and 2 (builder/commands/failure.py); anything else is a
bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

from builder import __version__
from builder.errors import TrainimgError

# Each command's name -> the one-line help `trainimg --help` lists, in that order; its module is
# builder/commands/<name>_cmd.py.
COMMANDS: dict[str, str] = {
    "matrix": "list, explain and check the compatibility matrix",
    "render": "render one Containerfile per cell into images/ (--check: list drift, write nothing)",
    "base": "make the offline base image(s) for local OSes (debootstrap -> engine load)",
    "wheelhouse": "fill a wheelhouse (local wheels + pip download) for air-gapped builds",
    "build": "build cells' images (podman-py or docker SDK), tag and record them",
    "extend": "a child image of a built cell with extra wheels that replace nothing it locked",
    "verify": "run the image's checks from inside a container (testinfra): versions, GPU, "
    "sm_100 kernels, a short BF16/FP8 training step, labels, user",
    "diff": "explain where two images differ: labels, configuration, layers, files",
    "arches": "list SASS/PTX targets per CUDA library of a file, directory or image",
    "preflight": "read-only host checks before an NVIDIA driver upgrade, and its impact on every "
    "image",
    "compat": "will an image (or a cell, or a requirement) run on a driver and GPU? no host needed",
    "env": "print the exports that point podman/docker at trainimg's engine "
    '(eval "$(trainimg env)")',
    "run": "run the bundled trainer in IMAGE (or CELL's image) right for this host",
    "slurm": "write an sbatch script: one container per node, the job's own GPUs, checkpoint "
    "and requeue at the time limit",
    "export": "write an image as a file for compute nodes without a registry (OCI .tar, enroot "
    ".sqsh)",
    "push": "push built cells to a registry and record their digests",
    "sbom": "write the CycloneDX SBOM (and SLSA provenance) of a built image",
    "attestations": "verify the signed SBOM and provenance beside a pushed image (DSSE, in-toto)",
    "policy": "write the policy.json / registries.d under which podman pulls only signed images",
    "pin": "resolve base image tags to digests and write them into matrix.yaml",
    "prune": "remove build-hash tags no lock record references",
    "facts": "refresh the facts data files from PyPI's own metadata (a reviewable diff; --write)",
    "completion": "print a bash, zsh or fish completion script (commands, flags, cell names)",
    "config": "show each setting (registry, engine, wheelhouse, inventory) and where it came "
    "from: flag, environment, config file, default",
}


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, wrapping at the terminal's width ($COLUMNS, as argparse reads it)
    between words only: its default breaks at hyphens and inside long words, which cuts
    `--no-index`, `read-only` and every cell name (rocky9-cu128-...) in two."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(
            " ".join(text.split()), width, break_long_words=False, break_on_hyphens=False
        )

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return textwrap.fill(
            " ".join(text.split()),
            width,
            initial_indent=indent,
            subsequent_indent=indent,
            break_long_words=False,
            break_on_hyphens=False,
        )


_HAND_LAID = re.compile(r"^(\s+)(\S+\s{2,})?")  # an indented line; its first column, if any


def _refill(text: str, width: int, indent: str) -> list[str]:
    """A description or epilog laid out by hand, to `width`: a paragraph of unindented
    lines is refilled; an indented line (an example, a table row) is kept, and one past the
    width is wrapped under its own second column (or its indent)."""
    out: list[str] = []
    paragraph: list[str] = []

    def wrap(words: str, first: str, rest: str) -> list[str]:
        return textwrap.wrap(words, width, initial_indent=first, subsequent_indent=rest,
                             break_long_words=False, break_on_hyphens=False)  # fmt: skip

    def flush() -> None:
        if paragraph:
            out.extend(wrap(" ".join(paragraph), indent, indent))
            paragraph.clear()

    for line in text.splitlines():
        if not line.strip():
            flush()
            out.append("")
            continue
        hand = _HAND_LAID.match(line)
        if hand is None:
            paragraph.append(line.strip())
            continue
        flush()
        lead = indent + hand.group(1)
        if len(indent + line) <= width:
            out.append(indent + line)
        elif hand.group(2):  # a table row: its text under its second column
            out.extend(wrap(line.strip(), lead, indent + " " * len(hand.group(0))))
        else:  # an example command: its comment above it, its words continued with \
            command, _, comment = line.strip().partition("  # ")
            if comment:
                out.append(f"{lead}# {comment.strip()}")
            pieces = wrap(command.strip(), lead, lead + "    ")
            out.extend(p if p.endswith("\\") or n == len(pieces) - 1 else p + " \\"
                       for n, p in enumerate(pieces))  # fmt: skip
    flush()
    return out


class RawDescriptionFormatter(HelpFormatter):
    """HelpFormatter for a command whose description and epilog are laid out by hand (its
    examples): their layout is kept (builder.cli._refill), within the width."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n".join(_refill(text, width, indent)) + "\n"


class Parser(argparse.ArgumentParser):
    """trainimg's parsers: HelpFormatter, or RawDescriptionFormatter where a command asks for
    argparse's RawDescriptionHelpFormatter. Subparsers are made of the parent's class, so
    every command's and subcommand's help wraps the same way."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        chosen = kwargs.get("formatter_class", HelpFormatter)
        if chosen is argparse.RawDescriptionHelpFormatter:
            chosen = RawDescriptionFormatter
        super().__init__(*args, **{**kwargs, "formatter_class": chosen})


class _OneCommand:
    """What a command module's register() is given: the subparsers, whose add_parser also
    gives the command its one-line help from COMMANDS (written there once) and its examples and
    exit codes from builder/commands/help_text.py."""

    def __init__(self, sub: Any, help_line: str) -> None:
        self._sub = sub
        self._help = help_line

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        from builder.commands import help_text  # with the command's own module, never before

        own = kwargs.get("epilog")
        kwargs["epilog"] = help_text.epilog(name, own, kwargs.get("description"))
        if kwargs["epilog"] != own:  # examples are laid out by hand: keep their lines
            kwargs["formatter_class"] = argparse.RawDescriptionHelpFormatter
        parser: argparse.ArgumentParser = self._sub.add_parser(name, help=self._help, **kwargs)
        return parser


def command_word(argv: Sequence[str]) -> str | None:
    """The command argv names: its first word that is not an option (trainimg's own options,
    -h and --version, take no value)."""
    return next((word for word in argv if not word.startswith("-")), None)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for argv: the command it names is registered in full (its module imported),
    every other one by name and help line only. None: every command in full (tests, docs)."""
    chosen = None if argv is None else command_word(argv)
    parser = Parser(
        prog="trainimg",
        description="Build, prove and run pinned GPU training images from a compatibility matrix.",
    )
    parser.add_argument("--version", action="version", version=f"trainimg {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, help_line in COMMANDS.items():
        if argv is None or name == chosen:
            command = importlib.import_module(f"builder.commands.{name}_cmd")
            command.register(_OneCommand(sub, help_line))
        else:
            sub.add_parser(name, help=help_line, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    try:
        args = build_parser(words).parse_args(words)
        code: int = args.func(args)
    except TrainimgError as exc:
        print(f"trainimg: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("trainimg: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`trainimg ... | head`): not an error of ours; silence the
        # interpreter's final flush of stdout, as the Python docs advise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:
        from builder.commands.failure import message_for  # only when something escaped

        message = message_for(exc)
        if message is None:
            raise  # a bug of ours: its traceback is what a report needs
        print(f"trainimg: error: {message}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
