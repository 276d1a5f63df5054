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
import sys
from collections.abc import Sequence
from typing import Any

from builder import __version__
from builder.errors import TrainimgError

# Each command's name -> the one-line help `trainimg --help` lists, in that order; its module is
# builder/commands/<name>_cmd.py.
COMMANDS: dict[str, str] = {
    "matrix": "list, explain and check the compatibility matrix",
    "render": "render one Containerfile per cell into images/ (--check: list drift, write nothing)",
    "base": "make the offline base image(s) for local OSes (debootstrap -> engine import)",
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


class _OneCommand:
    """What a command module's register() is given: the subparsers, whose add_parser also
    gives the command its one-line help from COMMANDS (written there once)."""

    def __init__(self, sub: Any, help_line: str) -> None:
        self._sub = sub
        self._help = help_line

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
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
    parser = argparse.ArgumentParser(
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
