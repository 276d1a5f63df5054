"""Precision presets: named settings of the precision layering (a dtype per part of a step).

The presets differ from each other only in the matmul rows, so `--compare bf16,fp8-fwd` isolates
what FP8 does: `fp8-fwd` is FP8 E4M3 forward, BF16 backward, `bf16` is the same with a BF16
forward, and `fp8` also casts gradients to E5M2. All three keep FP32 master weights and optimizer
state with BF16 compute and gradient sync, the way torchtitan runs FSDP2
(`MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=...)` over fp32 parameters): BF16
master weights lose every update smaller than half a BF16 ulp (2**-9 of the weight), which at a
350m model's LR floor is most of them. BF16 masters remain a choice (`master_weights: bf16`,
best with `stochastic_rounding: true`). `fp16` is classic mixed precision (FP32 master weights, FP16
matmuls, a GradScaler) and `fp32` is the plain reference the distributed tests compare against.
`mxfp8` is `fp8` with torchao's MXFP8 block scaling: E4M3 everywhere (the recipe casts
gradients to E4M3 too) with one scale per 32 elements; it is the one preset that also sets the
FP8 recipe.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from trainer.fp8_names import Recipe

LAYERING_KEYS: Final = (
    "master_weights",
    "optimizer_state",
    "forward_matmul",
    "backward_matmul",
    "activation",
    "grad_sync",
)

_BASE_LAYERING: Final = {
    "master_weights": "fp32",
    "optimizer_state": "fp32",
    "forward_matmul": "fp8_e4m3",
    "backward_matmul": "bf16",
    "activation": "bf16",
    "grad_sync": "bf16",
}

PRESETS: Final = MappingProxyType(
    {
        "bf16": MappingProxyType(_BASE_LAYERING | {"forward_matmul": "bf16"}),
        "fp8-fwd": MappingProxyType(dict(_BASE_LAYERING)),
        "fp8": MappingProxyType(_BASE_LAYERING | {"backward_matmul": "fp8_e5m2"}),
        "mxfp8": MappingProxyType(
            _BASE_LAYERING | {"backward_matmul": "fp8_e4m3", "fp8_recipe": Recipe.MXFP8}
        ),
        "fp16": MappingProxyType(
            {
                "master_weights": "fp32",
                "optimizer_state": "fp32",
                "forward_matmul": "fp16",
                "backward_matmul": "fp16",
                "activation": "fp32",
                "grad_sync": "fp32",
            }
        ),
        "fp32": MappingProxyType(
            {
                "master_weights": "fp32",
                "optimizer_state": "fp32",
                "forward_matmul": "fp32",
                "backward_matmul": "fp32",
                "activation": "fp32",
                "grad_sync": "fp32",
            }
        ),
    }
)

DEFAULT_PRESET: Final = "fp8-fwd"
