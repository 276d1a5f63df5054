"""The precision layering's combination rules and the dtypes a plan resolves to."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from trainer import precision
from trainer.config import PrecisionConfig
from trainer.errors import BadInput
from trainer.presets import PRESETS


def _p(**kw: object) -> PrecisionConfig:
    return dataclasses.replace(PrecisionConfig(), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_resolves(name: str) -> None:
    plan = precision.resolve(_p(**PRESETS[name]))
    assert plan.loss_scaling == (name == "fp16")
    assert plan.uses_fp8 == ("fp8" in name)  # fp8-fwd, fp8, mxfp8


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        (
            {"forward_matmul": "bf16", "backward_matmul": "fp8_e5m2"},
            "needs forward_matmul fp8_e4m3",
        ),
        ({"forward_matmul": "bf16", "backward_matmul": "fp16"}, "autograd runs the backward"),
        ({"backward_matmul": "fp16", "master_weights": "fp32"}, "not fp16"),
        (
            {
                "forward_matmul": "fp16",
                "backward_matmul": "fp16",
                "activation": "fp16",
                "master_weights": "bf16",
            },
            "GradScaler cannot unscale fp16",
        ),
        (
            {
                "forward_matmul": "fp32",
                "backward_matmul": "fp32",
                "activation": "fp32",
                "master_weights": "bf16",
            },
            "master_weights bf16 with fp32",
        ),
        ({"activation": "fp16"}, "activations are kept either in fp32 or in the matmul dtype"),
        ({"backward_matmul": "fp8_e5m2", "fp8_recipe": "rowwise"}, "casts gradients to E4M3"),
        ({"fp8_backend": "transformer_engine"}, "transformer_engine casts forward and backward"),
        (
            {
                "fp8_backend": "transformer_engine",
                "backward_matmul": "fp8_e5m2",
                "fp8_recipe": "rowwise",
            },
            "uses its own per-tensor recipe",
        ),
        ({"loss_scale_floor": 0.0}, "floor positive"),
        ({"fp8_recipe": "mxfp8"}, "set backward_matmul fp8_e4m3"),
        ({"stochastic_rounding": True}, "nothing to round"),
    ],
)
def test_impossible_combinations_are_refused(changes: dict[str, object], needle: str) -> None:
    p = _p(**changes)
    assert any(needle in problem for problem in precision.problems(p))
    with pytest.raises(BadInput, match="precision: "):
        precision.resolve(p)


def test_plan_dtypes_for_the_default_preset() -> None:
    """fp32 masters, bf16 compute (FSDP2's MixedPrecisionPolicy way): autocast does the casts."""
    plan = precision.resolve(PrecisionConfig())
    assert plan.master == torch.float32 and plan.optimizer_state == torch.float32
    assert plan.fp8_forward == torch.float8_e4m3fn and plan.fp8_backward is None
    assert plan.compute == torch.bfloat16 and plan.grad_sync == torch.bfloat16
    assert plan.needs_autocast
    seed = precision.resolve(_p(master_weights="bf16"))
    assert not seed.needs_autocast  # everything already bf16: autocast would only cost time


def test_autocast_when_fp32_tensors_meet_low_precision_matmuls() -> None:
    plan = precision.resolve(_p(**PRESETS["fp16"]))
    assert plan.needs_autocast and plan.compute == torch.float16
    with precision.autocast(plan, "cpu"):
        y = torch.nn.functional.linear(torch.ones(2, 4), torch.ones(3, 4))
    assert y.dtype == torch.float16
    rowwise = precision.resolve(_p(backward_matmul="fp8_e4m3", fp8_recipe="rowwise"))
    assert rowwise.fp8_backward == torch.float8_e4m3fn
