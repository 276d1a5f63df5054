"""`trainimg preflight`'s exit gate on the command line: `--fail-on KINDS` and the exit-code
table its --help prints (the table itself is builder/judgement/kind.py EXIT_TABLE, which
docs/preflight.md repeats; tests/preflight/test_exit_kinds.py holds both to it)."""

from __future__ import annotations

import argparse
import textwrap

from builder.judgement.kind import EXIT_TABLE, Kind, parse_fail_on


def fail_on_argument(text: str) -> frozenset[Kind]:
    """argparse's type for --fail-on: a bad list is exit 2 naming the value and the kinds."""
    try:
        return parse_fail_on(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def exit_table_help(width: int = 78) -> str:
    """The exit-code table as --help's epilog prints it (raw text: one row a paragraph)."""
    rows = [
        textwrap.fill(
            text,
            width,
            initial_indent=f"  {code}  ",
            subsequent_indent=" " * 5,
            break_on_hyphens=False,  # broken-now, --fail-on stay whole
        )
        for code, text in EXIT_TABLE
    ]
    return "\n".join(["exit codes (the worst kind that --fail-on counts decides):", *rows])
