"""FP8 amax/scale statistics from the layers torchao converted, and their warnings."""

from __future__ import annotations

import math

import torch
from torch import nn

from trainer.config import PrecisionConfig
from trainer.fp8 import torchao_backend
from trainer.fp8.stats import Fp8Monitor
from trainer.precision import resolve

E4M3_MAX = 448.0


def _layer(backward: str = "bf16") -> tuple[nn.Module, Fp8Monitor]:
    plan = resolve(PrecisionConfig(backward_matmul=backward))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 32, bias=False)).to(torch.bfloat16)
    torchao_backend.convert(model, {"0"}, plan)
    assert plan.fp8_forward is not None
    return model, Fp8Monitor(model, ["0"], plan.fp8_forward, plan.fp8_backward)


def test_scale_is_format_max_over_amax_and_only_armed_steps_count() -> None:
    model, monitor = _layer()
    x = torch.randn(16, 32, dtype=torch.bfloat16)
    model(x)  # not armed: nothing recorded
    assert math.isnan(monitor.table()[0, 0].item())
    monitor.arm()
    model(x).float().sum().backward()
    monitor.disarm()
    fields, warnings = monitor.summarize(monitor.table())
    amax = x.float().abs().max().item()
    assert fields["fp8_input_amax_max"] == amax
    assert fields["fp8_input_scale_median"] == E4M3_MAX / amax
    assert "fp8_grad_amax_max" not in fields  # fp8-fwd: gradients stay bf16
    assert fields["fp8_underflow_max"] < 0.01 and warnings == []
    assert not monitor._handles  # disarmed


def test_wide_ranges_and_overflow_warn() -> None:
    model, monitor = _layer()
    x = torch.full((16, 32), 1e-6, dtype=torch.bfloat16)
    x[0, 0] = 1e4  # one huge value: the tiny ones flush to zero in E4M3
    monitor.arm()
    with torch.no_grad():
        model(x)
    monitor.disarm()
    fields, warnings = monitor.summarize(monitor.table())
    assert fields["fp8_underflow_max"] > 0.9
    assert any("flush to zero" in w and "input" in w for w in warnings)
    table = monitor.table().clone()
    table[0, 0] = float("inf")
    _, warnings = monitor.summarize(table)
    assert any("overflow" in w for w in warnings)


def test_fp8_gradients_are_measured_against_e5m2() -> None:
    model, monitor = _layer("fp8_e5m2")
    monitor.arm()
    model(torch.randn(16, 32, dtype=torch.bfloat16)).float().pow(2).sum().backward()
    monitor.disarm()
    fields, _ = monitor.summarize(monitor.table())
    assert fields["fp8_grad_amax_max"] > 0 and 0 <= fields["fp8_grad_underflow_max"] <= 1
