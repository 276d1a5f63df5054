"""docs/trainer.md keeps up with the code: every config key, preset and exit code is there."""

from __future__ import annotations

import dataclasses

import pytest

from tests.trainer.trainer_helpers import REPO
from trainer.cli import EXIT_CODES_HELP
from trainer.config import SECTIONS
from trainer.presets import PRESETS

DOC = (REPO / "docs" / "trainer.md").read_text()
KEYS = [f"{name}.{f.name}" for name, cls in SECTIONS.items() for f in dataclasses.fields(cls)]


@pytest.mark.parametrize("key", KEYS)
def test_every_config_key_is_documented(key: str) -> None:
    assert f"`{key}`" in DOC


def test_presets_and_exit_codes_are_documented() -> None:
    for name in PRESETS:
        assert f"`{name}`" in DOC
    for code in ("| 0 |", "| 2 |", "| 3 |", "130 / 143"):
        assert code in DOC
    for code in ("0 ", "2 ", "3 ", "130", "143"):
        assert code in EXIT_CODES_HELP
