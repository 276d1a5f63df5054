"""NaN/Inf stops, loss-spike detection, the grad-norm window and MFU arithmetic."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from trainer.config import HealthConfig
from trainer.errors import NumericalStop
from trainer.health import SpikeDetector, check_finite
from trainer.metrics import Sink, Window, train_line
from trainer.mfu import mfu, peak_for, peak_tflops


@pytest.mark.parametrize(
    ("loss", "norm"), [(math.nan, 1.0), (1.0, math.inf), (-math.inf, math.nan)]
)
def test_non_finite_loss_or_grad_norm_stops(loss: float, norm: float) -> None:
    with pytest.raises(NumericalStop, match="step 7"):
        check_finite(7, loss, norm)
    check_finite(7, 2.5, 1.0)


def test_spike_detector_warns_stops_or_stays_quiet() -> None:
    warn = SpikeDetector(HealthConfig(spike_window=10, spike_factor=2.0))
    assert all(warn.observe(s, 3.0 - 0.01 * s) is None for s in range(1, 11))
    spike = warn.observe(11, 9.0)
    assert spike is not None and "loss spike" in spike.message()
    assert warn.observe(12, 2.9) is None  # the median shrugs the spike off
    stop = SpikeDetector(HealthConfig(spike_window=4, spike_action="stop"))
    for s in range(1, 5):
        stop.observe(s, 1.0)
    with pytest.raises(NumericalStop, match="spike_action is stop"):
        stop.observe(5, 5.0)
    off = SpikeDetector(HealthConfig(spike_window=4, spike_action="off"))
    for s in range(1, 5):
        off.observe(s, 1.0)
    assert off.observe(5, 50.0) is None


def test_spike_detector_waits_for_half_a_window_and_round_trips() -> None:
    det = SpikeDetector(HealthConfig(spike_window=10))
    for s in range(1, 5):
        assert det.observe(s, 1.0 if s < 4 else 100.0) is None  # history still too short
    copy = SpikeDetector(HealthConfig(spike_window=10))
    copy.load_state_dict(det.state_dict())
    assert list(copy.history) == list(det.history)


def test_grad_norm_window_median_and_p99() -> None:
    w = Window(100)
    for v in range(1, 201):
        w.add(float(v))
    w.add(math.nan)  # ignored
    assert w.quantile(0.5) == 150.0 and w.quantile(0.99) == 199.0
    assert Window(5).quantile(0.5) is None


def test_sink_writes_valid_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "m.jsonl"
    sink = Sink(str(path), enabled=True)
    sink.record({"event": "train", "step": 1, "loss": math.nan, "nested": {"x": math.inf}})
    sink.close()
    rec = json.loads(path.read_text())
    assert rec == {"event": "train", "step": 1, "loss": None, "nested": {"x": None}}
    silent = tmp_path / "rank1.jsonl"
    Sink(str(silent), enabled=False).record({"event": "train"})
    assert not silent.exists()


def test_console_line_shows_the_monitored_metrics() -> None:
    line = train_line(
        {
            "step": 3,
            "steps": 10,
            "loss": 2.5,
            "lr": 1e-3,
            "grad_norm": 1.0,
            "grad_norm_median": 0.9,
            "grad_norm_p99": 1.5,
            "tokens_per_s": 12345.0,
            "step_time_s": 0.02,
            "peak_mem_gb": 1.5,
            "mfu": 0.41,
            "fp8_input_scale_min": 10.0,
            "fp8_input_scale_median": 20.0,
            "fp8_input_scale_max": 300.0,
        }
    )
    for part in (
        "step 3/10",
        "loss 2.5000",
        "p99 1.500",
        "12,345 tok/s/dev",
        "20.0 ms/step",
        "mfu 41.0%",
        "fp8 scale 10..300",
    ):
        assert part in line


@pytest.mark.parametrize(
    ("name", "bf16"),
    [
        ("NVIDIA H100 80GB HBM3", 989.5),
        ("NVIDIA H100 PCIe", 756.5),
        ("NVIDIA H200", 989.5),
        ("NVIDIA H200 NVL", 835.5),  # not the SXM's 989.5: MFU would read ~16 % low
        ("NVIDIA B200", 2250.0),
        ("NVIDIA GB200", 2500.0),
        ("NVIDIA A100-SXM4-80GB", 312.0),
        ("NVIDIA L40S", 362.05),
        ("NVIDIA L4", 121.0),
        ("NVIDIA H100 NVL", 835.5),
        ("NVIDIA GeForce RTX 4090", None),
    ],
)
def test_peak_table_matches_gpu_names(name: str, bf16: float | None) -> None:
    peak = peak_for(name)
    assert (peak.bf16 if peak else None) == bf16
    if peak is not None:
        assert peak.source.startswith("https://")
        assert peak.verified or "unverified" in peak.source


def test_fp32_has_a_peak_only_with_tf32() -> None:
    peak = peak_for("NVIDIA H200")
    assert peak is not None
    assert peak_tflops(peak, torch.float32, tf32=False) is None
    assert peak_tflops(peak, torch.float32, tf32=True) == 494.5
    assert peak_tflops(peak, torch.bfloat16, tf32=False) == 989.5


def test_mfu_arithmetic() -> None:
    # 6e9 FLOP/token at 50k tok/s is 300 TFLOP/s: 30 % of a 1000 TFLOP/s peak.
    assert mfu(6e9, 50_000, 1000.0) == pytest.approx(0.3)
    assert peak_for("NVIDIA A100-SXM4-80GB").fp8 is None  # type: ignore[union-attr]
