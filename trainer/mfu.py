"""Model FLOPs utilisation: achieved training FLOP/s over the GPU's dense peak (seed §5.2).

Peaks are dense (no 2:4 sparsity) tensor-core TFLOP/s per GPU from NVIDIA's datasheets; the
datasheets print sparse figures with an asterisk, halved here. `mfu` uses the peak of the
run's high-precision matmul dtype (bf16/fp16; tf32 for fp32 when torch may use TF32), so BF16
and FP8 runs are measured against the same yardstick; `mfu_fp8` (FP8 runs only) uses the FP8
peak. A GPU not listed gets no MFU unless `train.peak_tflops` says what its peak is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

import torch


@dataclass(frozen=True)
class Peak:
    """Dense TFLOP/s by dtype; fp8 None where the GPU has no FP8 tensor cores."""

    bf16: float
    fp16: float
    tf32: float
    fp8: float | None
    source: str


_HOPPER: Final = "https://www.nvidia.com/en-us/data-center/h100/ (datasheet, SXM column)"
_H200: Final = "https://www.nvidia.com/en-us/data-center/h200/ (datasheet, SXM column)"
_H100_PCIE: Final = "https://www.nvidia.com/en-us/data-center/h100/ (datasheet, PCIe column)"

# First match wins, so the more specific patterns come first.
PEAKS: Final[tuple[tuple[str, Peak], ...]] = (
    (
        r"\bGB200\b",
        Peak(
            2500.0, 2500.0, 1250.0, 5000.0, "https://www.nvidia.com/en-us/data-center/gb200-nvl72/"
        ),
    ),
    (
        r"\bB200\b",
        Peak(
            2250.0,
            2250.0,
            1100.0,
            4500.0,
            "https://www.nvidia.com/en-us/data-center/hgx/ (HGX B200)",
        ),
    ),
    (r"\bH200\b", Peak(989.5, 989.5, 494.5, 1979.0, _H200)),
    (r"\bH100\b.*\bPCIe\b", Peak(756.5, 756.5, 378.0, 1513.0, _H100_PCIE)),
    (r"\bH100\b.*\b(SXM|HBM3)\b", Peak(989.5, 989.5, 494.5, 1979.0, _HOPPER)),
    (
        r"\bA100\b",
        Peak(312.0, 312.0, 156.0, None, "https://www.nvidia.com/en-us/data-center/a100/"),
    ),
    (
        r"\bL40S\b",
        Peak(362.05, 362.05, 183.0, 733.0, "https://www.nvidia.com/en-us/data-center/l40s/"),
    ),
    (
        r"\bL4\b",
        Peak(121.0, 121.0, 60.0, 242.5, "https://www.nvidia.com/en-us/data-center/l4/"),
    ),
)


def peak_for(device_name: str) -> Peak | None:
    for pattern, peak in PEAKS:
        if re.search(pattern, device_name):
            return peak
    return None


def peak_tflops(peak: Peak, dtype: torch.dtype, *, tf32: bool) -> float | None:
    """The peak for matmuls in `dtype`; fp32 matmuls reach the TF32 peak only when torch is
    allowed to use TF32 (off by default), and no tensor-core peak applies otherwise."""
    if dtype == torch.bfloat16:
        return peak.bf16
    if dtype == torch.float16:
        return peak.fp16
    return peak.tf32 if tf32 else None


def mfu(flops_per_token: float, tokens_per_s_per_device: float, peak_tflops: float) -> float:
    """Fraction of the peak (0..1) the run achieves."""
    return flops_per_token * tokens_per_s_per_device / (peak_tflops * 1e12)
