"""The precision layering, resolved: which dtype each part of a step runs in, and the rules.

The combination rules live here as a pure function so bad combinations are refused before a
model is built (exit 2), each with the reason it cannot work.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Final

import torch

from trainer.config import PrecisionConfig
from trainer.errors import BadInput
from trainer.fp8_names import ROWWISE_RECIPES, Backend, Recipe

DTYPES: Final = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
FP8_DTYPES: Final = {"fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}


def _is_fp8(name: str) -> bool:
    return name.startswith("fp8_")


def compute_name(p: PrecisionConfig) -> str:
    """The high-precision matmul dtype: what non-FP8 matmuls and FP8 matmul outputs use."""
    if not _is_fp8(p.forward_matmul):
        return p.forward_matmul
    if not _is_fp8(p.backward_matmul):
        return p.backward_matmul
    return "bf16"


def problems(p: PrecisionConfig) -> list[str]:
    """Every reason this layering cannot run (empty when it can)."""
    out: list[str] = []
    fwd8, bwd8 = _is_fp8(p.forward_matmul), _is_fp8(p.backward_matmul)
    compute = compute_name(p)
    if bwd8 and not fwd8:
        out.append(
            "backward_matmul FP8 needs forward_matmul fp8_e4m3: the FP8 backends cast gradients "
            "only in layers whose forward is FP8"
        )
    if not fwd8 and not bwd8 and p.forward_matmul != p.backward_matmul:
        out.append(
            f"forward_matmul {p.forward_matmul} with backward_matmul {p.backward_matmul}: "
            "autograd runs the backward in the forward's dtype; set both the same"
        )
    if fwd8 and p.backward_matmul == "fp16":
        out.append("FP8 layers keep bf16 (or fp32) as their high precision, not fp16")
    if compute == "fp16" and p.master_weights != "fp32":
        out.append(
            "fp16 matmuls need master_weights fp32: the GradScaler cannot unscale fp16 gradients"
        )
    if p.master_weights == "bf16" and compute == "fp32":
        out.append("master_weights bf16 with fp32 matmuls: use master_weights fp32 for fp32")
    if p.activation not in ("fp32", compute):
        out.append(
            f"activation {p.activation} with {compute} matmuls: activations are kept either in "
            "fp32 or in the matmul dtype"
        )
    if p.fp8_recipe == Recipe.MXFP8 and fwd8 and p.backward_matmul != "fp8_e4m3":
        out.append(
            "fp8_recipe mxfp8 casts all three GEMMs to E4M3 with 32-element blocks (torchao's "
            "MXFP8 training): set backward_matmul fp8_e4m3"
        )
    if bwd8 and p.fp8_backend == Backend.TORCHAO and p.fp8_recipe != Recipe.MXFP8:
        rowwise = p.fp8_recipe in ROWWISE_RECIPES
        if rowwise and p.backward_matmul == "fp8_e5m2":
            out.append(
                f"fp8_recipe {p.fp8_recipe} casts gradients to E4M3 (torchao's rowwise recipes); "
                "set backward_matmul fp8_e4m3, or use fp8_recipe tensorwise for E5M2"
            )
    if p.fp8_backend == Backend.TRANSFORMER_ENGINE:
        if not fwd8 or not bwd8:
            out.append(
                "fp8_backend transformer_engine casts forward and backward: set forward_matmul "
                "fp8_e4m3 and backward_matmul fp8_e5m2 (HYBRID) or fp8_e4m3, or use torchao for "
                "an FP8 forward with a BF16 backward"
            )
        if p.fp8_recipe != Recipe.TENSORWISE:
            out.append(
                "fp8_backend transformer_engine uses its own per-tensor recipe: set fp8_recipe "
                "tensorwise"
            )
    if p.stochastic_rounding and p.master_weights != "bf16":
        out.append(
            "stochastic_rounding rounds bf16 master weights; with master_weights "
            f"{p.master_weights} there is nothing to round: drop it or use master_weights bf16"
        )
    if p.loss_scale_floor <= 0 or p.loss_scale_init < p.loss_scale_floor:
        out.append("loss_scale_init must be at least loss_scale_floor, and the floor positive")
    return out


@dataclass(frozen=True)
class Plan:
    """A checked layering as torch dtypes."""

    config: PrecisionConfig
    master: torch.dtype
    optimizer_state: torch.dtype
    compute: torch.dtype
    activation: torch.dtype
    grad_sync: torch.dtype
    fp8_forward: torch.dtype | None
    fp8_backward: torch.dtype | None

    @property
    def uses_fp8(self) -> bool:
        return self.fp8_forward is not None

    @property
    def loss_scaling(self) -> bool:
        """fp16's narrow range needs a GradScaler; bf16 and FP8 (scaled per tensor) do not."""
        return self.compute == torch.float16

    @property
    def needs_autocast(self) -> bool:
        """fp32 tensors meet lower-precision matmuls: autocast does the casting."""
        return self.compute != torch.float32 and (
            self.master == torch.float32 or self.activation == torch.float32
        )


def resolve(p: PrecisionConfig) -> Plan:
    found = problems(p)
    if found:
        raise BadInput("precision: " + "; ".join(found))
    return Plan(
        config=p,
        master=DTYPES[p.master_weights],
        optimizer_state=DTYPES[p.optimizer_state],
        compute=DTYPES[compute_name(p)],
        activation=DTYPES[p.activation],
        grad_sync=DTYPES[p.grad_sync],
        fp8_forward=FP8_DTYPES.get(p.forward_matmul),
        fp8_backward=FP8_DTYPES.get(p.backward_matmul),
    )


def autocast(plan: Plan, device_type: str) -> contextlib.AbstractContextManager[object]:
    """The forward's autocast context (a no-op when every tensor is already in its dtype)."""
    if not plan.needs_autocast:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device_type, dtype=plan.compute)
