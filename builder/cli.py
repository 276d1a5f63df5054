"""The `trainimg` front: builds the parser, calls the chosen command, turns what escapes it
into an exit code.

Each command is a module of builder.commands that registers its own subparser and a
`run(args) -> int`; what a command does - checking its options, choosing cells, talking to an
engine - lives in that run (e.g. builder.commands.build_cmd.run), never here. This module only
maps what escapes a run: a TrainimgError to its own exit code, Ctrl-C to 130, a reader of stdout
that went away (`trainimg ... | head`) to 141.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from builder import __version__
from builder.commands import (
    arches_cmd,
    base_cmd,
    build_cmd,
    compat_cmd,
    diff_cmd,
    env_cmd,
    extend_cmd,
    matrix_cmd,
    pin_cmd,
    policy_cmd,
    preflight_cmd,
    prune_cmd,
    push_cmd,
    render_cmd,
    run_cmd,
    sbom_cmd,
    slurm_cmd,
    verify_cmd,
    wheelhouse_cmd,
)
from builder.errors import TrainimgError

COMMANDS = (
    matrix_cmd,
    render_cmd,
    base_cmd,
    wheelhouse_cmd,
    build_cmd,
    extend_cmd,
    verify_cmd,
    diff_cmd,
    arches_cmd,
    preflight_cmd,
    compat_cmd,
    env_cmd,
    run_cmd,
    slurm_cmd,
    push_cmd,
    sbom_cmd,
    policy_cmd,
    pin_cmd,
    prune_cmd,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trainimg",
        description="Build, prove and run pinned GPU training images from a compatibility matrix.",
    )
    parser.add_argument("--version", action="version", version=f"trainimg {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
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
    return code


if __name__ == "__main__":
    sys.exit(main())
