"""What CUDA's FP8 GEMM accepts, and which GPUs run FP8 at all, as pure functions.

torch._scaled_mm on the CPU (torch >= 2.13) accepts operands CUDA refuses: dims that are not
multiples of 16, e5m2 x e5m2, a row-major second operand. A CPU run would therefore pass where
the same config fails on a GPU, so the trainer applies CUDA's rules itself, on every device.
Sources: pytorch aten/src/ATen/native/cuda/Blas.cpp (scaled_mm checks) and RowwiseScaledMM.cu
(dispatch_fp8_rowwise_kernel_on_sm: row-wise kernels for sm_89, sm_9x, and sm_10x/sm_11x, which
share the Sm100 kernels); pytorch issue #192707 (row-wise fails with CUBLAS_STATUS_NOT_SUPPORTED
on sm_120). builder/facts/gpus.py states the same rules for the builder (a test compares them).
"""

from __future__ import annotations

from typing import Final

import torch

from trainer.fp8_names import ROWWISE_RECIPES, Recipe

FP8_MIN_CC: Final = (8, 9)
FP8_MAX: Final = {
    torch.float8_e4m3fn: float(torch.finfo(torch.float8_e4m3fn).max),
    torch.float8_e5m2: float(torch.finfo(torch.float8_e5m2).max),
}


def scaled_mm_problems(
    k: int,
    n: int,
    a_dtype: torch.dtype = torch.float8_e4m3fn,
    b_dtype: torch.dtype = torch.float8_e4m3fn,
    *,
    b_column_major: bool = True,
) -> list[str]:
    """Why CUDA's _scaled_mm would refuse (M x K) @ (K x N); empty when it accepts."""
    out = []
    if k % 16:
        out.append(f"inner dim {k} is not a multiple of 16")
    if n % 16:
        out.append(f"output dim {n} is not a multiple of 16")
    if a_dtype == torch.float8_e5m2 and b_dtype == torch.float8_e5m2:
        out.append("both operands are e5m2")
    if not b_column_major:
        out.append("the second operand is not column-major")
    return out


MX_BLOCK: Final = 32
"""MXFP8 (OCP Microscaling Formats v1.0): one e8m0 scale per 32 consecutive elements along
the contracted dim, so every dim a GEMM contracts must be a multiple of 32."""
MX_CCS: Final = ((10, 0), (10, 3))
"""Where torchao's MXFP8 training kernels run: its CUDA extension carries sm_100 SASS (B200,
GB200; the B300's sm_103 runs it), its Triton casts target the same (torchao
prototype/mx_formats, `is_sm_at_least_100`). sm_110 and sm_12x have block-scaled GEMMs but not
these kernels."""


def linear_problems(
    in_features: int, out_features: int, recipe: str = Recipe.TENSORWISE
) -> list[str]:
    """Why a Linear layer cannot run FP8 on CUDA (forward and both backward GEMMs)."""
    if recipe == Recipe.MXFP8:
        return [
            f"{what} {dim} is not a multiple of the MX block {MX_BLOCK}"
            for what, dim in (("in_features", in_features), ("out_features", out_features))
            if dim % MX_BLOCK
        ]
    return scaled_mm_problems(in_features, out_features)


def token_problems(tokens_per_micro_batch: int, recipe: str = Recipe.TENSORWISE) -> list[str]:
    """FP8 gradients: the weight-gradient GEMM contracts over tokens, so they count as K."""
    multiple = MX_BLOCK if recipe == Recipe.MXFP8 else 16
    if tokens_per_micro_batch % multiple:
        return [
            f"micro-batch tokens {tokens_per_micro_batch} is not a multiple of {multiple} (the "
            "inner dim of the FP8 weight-gradient GEMM)"
        ]
    return []


def rowwise_supported(cc: tuple[int, int]) -> bool:
    """Row-wise scaled GEMM kernels exist for sm_89, sm_9x, sm_10x and sm_11x (not sm_120/121)."""
    return cc == (8, 9) or cc[0] in (9, 10, 11)


def device_problem(name: str, cc: tuple[int, int], recipe: str) -> str | None:
    """Why FP8 with `recipe` cannot run on this GPU (None when it can)."""
    sm = f"sm_{cc[0]}{cc[1]}"
    if cc < FP8_MIN_CC:
        return (
            f"FP8 needs an NVIDIA GPU with compute capability 8.9 or newer (Ada, Hopper, "
            f"Blackwell); {name} has compute capability {cc[0]}.{cc[1]} ({sm}). "
            "Use --preset bf16 on this GPU."
        )
    if recipe == Recipe.MXFP8 and cc not in MX_CCS:
        return (
            f"fp8_recipe mxfp8 runs torchao's MXFP8 kernels, which exist for sm_100 and sm_103 "
            f"(B200, GB200, B300) only; {name} is {sm} (compute capability {cc[0]}.{cc[1]}). "
            "Use fp8_recipe tensorwise or rowwise on this GPU."
        )
    if recipe in ROWWISE_RECIPES and not rowwise_supported(cc):
        return (
            f"fp8_recipe {recipe} is not supported on {name} ({sm}, compute capability "
            f"{cc[0]}.{cc[1]}): row-wise scaled GEMMs exist only for sm_89, sm_9x, sm_10x and "
            "sm_11x (cuBLAS returns CUBLAS_STATUS_NOT_SUPPORTED on sm_120). "
            "Use fp8_recipe tensorwise."
        )
    return None
