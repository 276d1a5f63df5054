"""The FP8 recipe and backend names, defined once: config choices, the precision rules, the
layer rules and the backends compare against these members (StrEnum: a member equals its
string, so config files, flags and checkpoints keep the plain names)."""

from __future__ import annotations

from enum import StrEnum


class Recipe(StrEnum):
    TENSORWISE = "tensorwise"
    ROWWISE = "rowwise"
    ROWWISE_WITH_GW_HP = "rowwise_with_gw_hp"
    MXFP8 = "mxfp8"


ROWWISE_RECIPES = (Recipe.ROWWISE, Recipe.ROWWISE_WITH_GW_HP)


class Backend(StrEnum):
    TORCHAO = "torchao"
    TRANSFORMER_ENGINE = "transformer_engine"
