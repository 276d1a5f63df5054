"""`--json [FILE|-]`, one option with one meaning on every command that prints JSON, and the
envelope every such document carries (docs/json.md).

Bare `--json` (or `--json -`) prints the command's JSON document on stdout in place of its text;
`--json FILE` writes the document to FILE (beside, then renamed: no reader sees half of it) and
prints the text as without --json. FILE is checked before the command does any work, so a
verify of many minutes never ends on an unwritable path.

`--json` takes the word after it as FILE (argparse's optional value): on a command with a
positional (compat IMAGE, matrix explain CELL, arches TARGET, verify IMAGE) put the positional
first, or write `--json=FILE`; a positional taken as FILE is refused, never written to.

Every document starts with `kind` (`trainimg.<command>`, a name to match) and `schema` (an
integer, the version of that kind's shape, to compare): a consumer checks both before it reads
on. docs/schemas/<kind>.schema.json is each kind's JSON Schema.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.atomic_file import atomic_write
from builder.commands.common import output_file
from builder.errors import TrainimgError
from builder.host.shown import shown

STDOUT = "-"


@dataclass(frozen=True)
class JsonKind:
    """A kind of document: its name (`trainimg.<command>`, docs/schemas/<name>.schema.json)
    and the version of its shape, raised when a key is removed, renamed or changes meaning."""

    name: str
    schema: int


def _destination(text: str) -> str:
    """argparse's type for --json's value: `-`, or a file that can be written (checked now)."""
    if text == STDOUT:
        return text
    return str(output_file(text, "--json"))


def add_json_option(p: argparse._ActionsContainer, kind: JsonKind) -> None:
    """Register --json [FILE|-] on `p` (a parser, or a group of exclusive options), whose
    documents are of `kind` (e.g. trainimg.compat)."""
    p.add_argument(
        "--json",
        nargs="?",
        const=STDOUT,
        default=None,
        type=_destination,
        metavar="FILE",
        help=f"print the JSON document ({kind.name}, docs/json.md) instead of the text; "
        "--json FILE (or --json=FILE) writes it to FILE and prints the text",
    )


def document(kind: JsonKind, body: dict[str, Any]) -> dict[str, Any]:
    """`body` under the envelope: kind and schema first, then the command's own keys."""
    return {"kind": kind.name, "schema": kind.schema, **body}


def write_json(target: str, doc: dict[str, Any], indent: int | None = 2) -> None:
    """The document to stdout (`-`) or to the file `target`, written atomically."""
    text = json.dumps(doc, indent=indent)  # dumps: the C encoder when indent is None
    if target == STDOUT:
        print(text)
    else:
        atomic_write(Path(target), text + "\n")


def text_wanted(args: argparse.Namespace) -> bool:
    """Does the command print its text? Yes unless its JSON goes to stdout."""
    return bool(args.json != STDOUT)


def taken_positional(args: argparse.Namespace, positional: str, shown_as: str) -> None:
    """Refuse a --json that took the command's positional as FILE (`compat --json CELL ...`):
    the positional is missing and --json holds a file name."""
    if getattr(args, positional) is None and args.json not in (None, STDOUT):
        raise TrainimgError(
            f"--json took {shown(args.json)} as its FILE and no {shown_as} is left: put {shown_as} "
            f"before --json, or write --json=FILE for a file"
        )
