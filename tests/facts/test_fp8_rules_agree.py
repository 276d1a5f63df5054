"""The builder's and the trainer's FP8 rules agree for every GPU the builder knows.

The trainer is a payload that never imports the builder, so each states the rules on its own:
the builder (builder/facts/gpus.py) to warn at matrix time, the trainer (trainer/fp8/rules.py)
to refuse at run time. This test is where the two tables meet.
"""

from __future__ import annotations

import pytest

from builder.facts import gpus as gpu_facts
from trainer.fp8 import rules as trainer_rules

KNOWN_CCS = sorted({g.cc for g in gpu_facts.GPUS.values()})
# Every capability the builder knows, and the edges either side of the FP8 threshold.
CCS = sorted({*KNOWN_CCS, (7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (11, 0)})


def builder_runs_fp8(cc: gpu_facts.CC) -> bool:
    return cc >= gpu_facts.FP8_MIN_CC


def builder_runs_rowwise(cc: gpu_facts.CC) -> bool:
    return builder_runs_fp8(cc) and cc not in gpu_facts.ROWWISE_UNSUPPORTED_CC


def test_the_fp8_thresholds_are_the_same() -> None:
    assert tuple(trainer_rules.FP8_MIN_CC) == gpu_facts.FP8_MIN_CC


@pytest.mark.parametrize("cc", CCS, ids=lambda cc: f"sm_{cc[0]}{cc[1]}")
def test_tensorwise_fp8_is_allowed_on_the_same_gpus(cc: gpu_facts.CC) -> None:
    trainer_ok = trainer_rules.device_problem("gpu", cc, "tensorwise") is None
    assert trainer_ok == builder_runs_fp8(cc)


@pytest.mark.parametrize("cc", CCS, ids=lambda cc: f"sm_{cc[0]}{cc[1]}")
@pytest.mark.parametrize("recipe", ["rowwise", "rowwise_with_gw_hp"])
def test_rowwise_fp8_is_allowed_on_the_same_gpus(cc: gpu_facts.CC, recipe: str) -> None:
    trainer_ok = trainer_rules.device_problem("gpu", cc, recipe) is None
    assert trainer_ok == builder_runs_rowwise(cc)


def test_thor_runs_rowwise_fp8() -> None:
    """sm_110 (Jetson Thor) shares the Sm100 row-wise kernels (pytorch RowwiseScaledMM.cu):
    the two tables disagreed here before."""
    assert (11, 0) in KNOWN_CCS
    assert builder_runs_rowwise((11, 0))
    assert trainer_rules.rowwise_supported((11, 0))
