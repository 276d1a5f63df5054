"""Model FLOPs utilisation: achieved training FLOP/s over the GPU's dense peak.

Peaks are dense (no 2:4 sparsity) tensor-core TFLOP/s per GPU from NVIDIA's datasheets; the
datasheets print sparse figures with an asterisk, halved here. `mfu` uses the peak of the
run's high-precision matmul dtype (bf16/fp16; tf32 for fp32 when torch may use TF32), so BF16
and FP8 runs are measured against the same yardstick; `mfu_fp8` (FP8 runs only) uses the FP8
peak. A GPU not listed gets no MFU unless `train.peak_tflops` says what its peak is.

Keyed by exact product as torch names it (`NVIDIA H200` is the SXM board, `NVIDIA H200 NVL` the
600 W PCIe card with ~16 % less compute; `NVIDIA H100 80GB HBM3` the SXM, `NVIDIA H100 PCIe`,
`NVIDIA H100 NVL`). `verified`: the figures were checked against the public page in `source`;
False marks a figure taken from NVIDIA's datasheet column without a stored copy to check it by.
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
    verified: bool = True


_HOPPER: Final = (
    "https://awesomeagents.ai/hardware/nvidia-h100 (H100 SXM: FP8 3,958 TFLOP/s with sparsity; "
    "NVIDIA's https://www.nvidia.com/en-us/data-center/h100/, SXM column)"
)
_H200: Final = (
    "https://itkb.uw.cz/2026/06/nvidia-h200-vs-b300-precisions-cores.html (H200 SXM, dense: "
    "BF16 ~989, FP8 ~1,979 TFLOP/s; NVIDIA's https://www.nvidia.com/en-us/data-center/h200/)"
)
_H200_NVL: Final = (
    "https://www.nvidia.com/en-us/data-center/h200/ (datasheet, H200 NVL column: BF16 1,671, "
    "FP8 3,341, TF32 835 TFLOP/s with sparsity; unverified here)"
)
_H100_PCIE: Final = (
    "https://www.nvidia.com/en-us/data-center/h100/ (datasheet, PCIe column; unverified here)"
)
_H100_NVL: Final = (
    "https://www.nvidia.com/en-us/data-center/h100/ (datasheet, H100 NVL column: BF16 1,671, "
    "FP8 3,341, TF32 835 TFLOP/s with sparsity; unverified here)"
)
_BLACKWELL: Final = (
    "https://glennklockwood.com/garden/processors/B200 (from NVIDIA's Blackwell datasheet: HGX "
    "B200 at 1,000 W, GB200 at 1,200 W, dense matrix TFLOP/s)"
)

# First match wins, so the more specific patterns come first.
PEAKS: Final[tuple[tuple[str, Peak], ...]] = (
    (
        r"\bGB200\b",
        Peak(2500.0, 2500.0, 1250.0, 5000.0, _BLACKWELL),
    ),
    (
        r"\bB200\b",
        Peak(2250.0, 2250.0, 1100.0, 4500.0, _BLACKWELL),
    ),
    (r"\bH200 NVL\b", Peak(835.5, 835.5, 417.5, 1670.5, _H200_NVL, verified=False)),
    (r"\bH200\b", Peak(989.5, 989.5, 494.5, 1979.0, _H200)),
    (r"\bH100 NVL\b", Peak(835.5, 835.5, 417.5, 1670.5, _H100_NVL, verified=False)),
    (r"\bH100\b.*\bPCIe\b", Peak(756.5, 756.5, 378.0, 1513.0, _H100_PCIE, verified=False)),
    (r"\bH100\b.*\b(SXM|HBM3)\b", Peak(989.5, 989.5, 494.5, 1979.0, _HOPPER)),
    (
        r"\bA100\b",
        Peak(
            312.0,
            312.0,
            156.0,
            None,
            "https://www.nvidia.com/en-us/data-center/a100/ (unverified here)",
            verified=False,
        ),
    ),
    (
        r"\bL40S\b",
        Peak(
            362.05,
            362.05,
            183.0,
            733.0,
            "https://www.nvidia.com/en-us/data-center/l40s/ (unverified here)",
            verified=False,
        ),
    ),
    (
        r"\bL4\b",
        Peak(
            121.0,
            121.0,
            60.0,
            242.5,
            "https://www.nvidia.com/en-us/data-center/l4/ (unverified here)",
            verified=False,
        ),
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
