"""The FP8 share of a step's FLOPs and the speed-up ceiling it implies (issue 19's figures)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from trainer.config import ModelConfig, PrecisionConfig
from trainer.fp8 import converters
from trainer.fp8.layers import plan_layers
from trainer.fp8.share import fp8_share
from trainer.fp8_names import Recipe
from trainer.model import Transformer, flops_per_token, resolve_arch
from trainer.precision import Plan, resolve

SENSITIVE = ["embedding", "head", "first_block", "last_block"]


def _share(size: str, backward: str, recipe: str = "tensorwise") -> tuple[int, float, float]:
    """FP8 layers, share and ceiling at seq 1024 with torchao's CUDA size filter."""
    arch = resolve_arch(ModelConfig(size=size), 32768)
    with torch.device("meta"):  # shapes only
        model = Transformer(arch)
    plan = resolve(
        dataclasses.replace(PrecisionConfig(), backward_matmul=backward, fp8_recipe=Recipe(recipe))
    )
    converter = converters.for_plan(plan, "none")
    assert converter is not None
    choices = plan_layers(model, SENSITIVE, arch.n_layers, converter.size_filter(), recipe)
    share = fp8_share(choices, converter.fp8_gemms, flops_per_token(arch, 1024), None)
    return share.layers, share.share, share.ceiling


@pytest.mark.parametrize(
    ("size", "backward", "recipe", "layers", "ceiling"),
    [
        ("350m", "bf16", "tensorwise", 44, 1.09),  # fp8-fwd: the forward GEMM only
        ("350m", "fp8_e5m2", "tensorwise", 44, 1.33),  # fp8: all three GEMMs
        ("760m", "bf16", "tensorwise", 88, 1.15),
        ("760m", "fp8_e5m2", "tensorwise", 88, 1.63),
        ("350m", "fp8_e4m3", "rowwise", 0, 1.00),  # the rowwise filter keeps every layer
    ],
)
def test_the_ceiling_of_each_recipe(
    size: str, backward: str, recipe: str, layers: int, ceiling: float, torchao: None
) -> None:
    found_layers, _, found_ceiling = _share(size, backward, recipe)
    assert found_layers == layers and found_ceiling == pytest.approx(ceiling, abs=0.005)


def _gemms(plan: Plan) -> int:
    converter = converters.for_plan(plan, "none")
    return 0 if converter is None else converter.fp8_gemms


def test_gemm_counts_follow_the_recipe() -> None:
    base = PrecisionConfig()
    counts = [
        _gemms(resolve(dataclasses.replace(base, **kw)))  # type: ignore[arg-type]
        for kw in (
            {"forward_matmul": "bf16"},
            {},
            {"backward_matmul": "fp8_e5m2"},
            {"backward_matmul": "fp8_e4m3", "fp8_recipe": "rowwise_with_gw_hp"},
            {"backward_matmul": "fp8_e4m3", "fp8_recipe": "mxfp8"},
        )
    ]
    assert counts == [0, 1, 3, 2, 3]
