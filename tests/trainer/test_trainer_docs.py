"""docs/trainer.md keeps up with the code: every config key, preset and exit code is there."""

from __future__ import annotations

import dataclasses
import re

import pytest

from tests.trainer.trainer_helpers import REPO
from trainer.cli import EXIT_CODES_HELP, GATE_EXIT_CODES_HELP
from trainer.config import SECTIONS
from trainer.errors import (
    EXIT_BAD_INPUT,
    EXIT_GATE_FAILED,
    EXIT_NUMERICAL,
    EXIT_OK,
    EXIT_SIGINT,
    EXIT_SIGTERM,
    EXIT_STOPPED_UNSAVED,
)
from trainer.presets import PRESETS

DOC = (REPO / "docs" / "trainer.md").read_text()
KEYS = [f"{name}.{f.name}" for name, cls in SECTIONS.items() for f in dataclasses.fields(cls)]


@pytest.mark.parametrize("key", KEYS)
def test_every_config_key_is_documented(key: str) -> None:
    assert f"`{key}`" in DOC


CODES = {EXIT_OK, EXIT_BAD_INPUT, EXIT_NUMERICAL, EXIT_STOPPED_UNSAVED, EXIT_GATE_FAILED,
         EXIT_SIGINT, EXIT_SIGTERM}  # fmt: skip


def listed_codes(help_text: str) -> set[int]:
    """The codes --help lists: each entry's leading number, and the `N SIGxxx` pairs of the
    signal entry (whole numbers only: "0" must not be found inside "130")."""
    leading = re.findall(r"^ {2}(\d+) ", help_text, re.M)
    signals = re.findall(r"\b(\d+) SIG[A-Z]+\b", help_text)
    return {int(code) for code in leading + signals}


def documented_codes(doc: str) -> set[int]:
    """The codes in the first column of docs/trainer.md's exit-code table (`| 130 / 143 |`)."""
    rows = re.findall(r"^\| ([\d /]+) \|", doc, re.M)
    return {int(code) for row in rows for code in row.split("/")}


def test_presets_and_exit_codes_are_documented() -> None:
    for name in PRESETS:
        assert f"`{name}`" in DOC
    assert documented_codes(DOC) == CODES
    assert listed_codes(EXIT_CODES_HELP) == CODES
    gate_codes = {EXIT_OK, EXIT_BAD_INPUT, EXIT_NUMERICAL, EXIT_STOPPED_UNSAVED, EXIT_GATE_FAILED}
    assert listed_codes(GATE_EXIT_CODES_HELP) == gate_codes
