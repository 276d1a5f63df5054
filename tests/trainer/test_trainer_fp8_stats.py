"""FP8 amax/scale statistics from the layers torchao converted, and their warnings."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch import nn

from tests.trainer.trainer_helpers import QUICK, RunCli, records
from trainer.config import PrecisionConfig
from trainer.fp8 import converters
from trainer.fp8.stats import NOT_MEASURED, Fp8Monitor
from trainer.precision import resolve

E4M3_MAX = 448.0
CPU = torch.device("cpu")


def _layer(backward: str = "bf16") -> tuple[nn.Module, Fp8Monitor]:
    plan = resolve(PrecisionConfig(backward_matmul=backward))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 32, bias=False)).to(torch.bfloat16)
    converter = converters.for_plan(plan, "none")
    assert converter is not None
    converter.convert(model, {"0"}, CPU)
    assert plan.fp8_forward is not None
    return model, Fp8Monitor(model, ["0"], plan.fp8_forward, plan.fp8_backward)


def test_scale_is_format_max_over_amax_and_only_armed_steps_count(torchao: None) -> None:
    model, monitor = _layer()
    x = torch.randn(16, 32, dtype=torch.bfloat16)
    model(x)  # not armed: nothing recorded
    assert monitor.table(CPU)[0, 0].item() == NOT_MEASURED
    monitor.arm()
    model(x).float().sum().backward()
    monitor.disarm()
    fields, warnings = monitor.summarize(monitor.table(CPU))
    amax = x.float().abs().max().item()
    assert fields["fp8_input_amax_max"] == amax
    assert fields["fp8_input_scale_median"] == E4M3_MAX / amax
    assert "fp8_grad_amax_max" not in fields  # fp8-fwd: gradients stay bf16
    assert fields["fp8_underflow_max"] < 0.01 and warnings == []
    assert not monitor._handles  # disarmed


def test_wide_ranges_and_overflow_warn(torchao: None) -> None:
    model, monitor = _layer()
    x = torch.full((16, 32), 1e-6, dtype=torch.bfloat16)
    x[0, 0] = 1e4  # one huge value: the tiny ones flush to zero in E4M3
    monitor.arm()
    with torch.no_grad():
        model(x)
    monitor.disarm()
    fields, warnings = monitor.summarize(monitor.table(CPU))
    assert fields["fp8_underflow_max"] > 0.9
    assert any("flush to zero" in w and "input" in w for w in warnings)
    table = monitor.table(CPU).clone()
    table[0, 0] = float("inf")
    _, warnings = monitor.summarize(table)
    assert any("overflow" in w for w in warnings)


def test_fp8_gradients_are_measured_against_e5m2(torchao: None) -> None:
    model, monitor = _layer("fp8_e5m2")
    monitor.arm()
    model(torch.randn(16, 32, dtype=torch.bfloat16)).float().pow(2).sum().backward()
    monitor.disarm()
    fields, _ = monitor.summarize(monitor.table(CPU))
    assert fields["fp8_grad_amax_max"] > 0 and 0 <= fields["fp8_grad_underflow_max"] <= 1


def test_a_layer_that_did_not_run_is_not_measured_never_overflow(torchao: None) -> None:
    _, monitor = _layer()
    fields, warnings = monitor.summarize(monitor.table(CPU))  # armed for nothing: all unmeasured
    assert fields["fp8_layers"] == 1 and fields["fp8_layers_measured"] == 0
    assert fields["fp8_input_amax_max"] is None and fields["fp8_input_scale_min"] is None
    assert warnings == []


def test_one_ranks_nan_amax_survives_the_max_across_ranks(torchao: None) -> None:
    """The loop all-reduces the table with MAX: NaN must not lose to another rank's value."""
    model, monitor = _layer()
    monitor.arm()
    with torch.no_grad():
        model(torch.full((16, 32), float("nan"), dtype=torch.bfloat16))
    monitor.disarm()
    overflowing = monitor.table(CPU)
    monitor.arm()
    with torch.no_grad():
        model(torch.ones(16, 32, dtype=torch.bfloat16))
    monitor.disarm()
    finite = monitor.table(CPU)
    both = torch.maximum(overflowing, finite)  # what all_reduce(op=MAX) computes
    fields, warnings = monitor.summarize(both)
    assert math.isinf(fields["fp8_input_amax_max"])
    assert any("input amax is not finite" in w for w in warnings)


@pytest.mark.integration
def test_compiled_fp8_reports_finite_statistics(run_cli: RunCli, tmp_path: Path) -> None:
    """Hooks do not run inside torch.compile'd blocks: the loop measures the monitored
    micro-batch eagerly. Step 1 compiles without hooks, step 2 is the first log step."""
    metrics = tmp_path / "m.jsonl"
    res = run_cli(
        "train", *QUICK, "--preset", "fp8", "--compile", "--steps", "2", "--log-interval", "2",
        "--sensitive-layers", "embedding,head", "--set", "model.n_layers=2",
        "--metrics-file", str(metrics),
    )  # fmt: skip
    assert res.code == 0, res.err
    assert "torch.compile on" in res.out and "overflow" not in res.err
    (rec,) = records(metrics)
    assert rec["fp8_layers"] == rec["fp8_layers_measured"] == 8
    for key in ("fp8_input_amax_max", "fp8_input_scale_min", "fp8_grad_amax_max"):
        assert rec[key] is not None and 0 < rec[key] < math.inf, key
    assert "warnings" not in rec
