"""The precision plan applied to the model: which layers become FP8 (torchao or Transformer
Engine), and the contexts around each micro-batch's forward (autocast) and weights (casts)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from trainer import precision
from trainer.fp8 import te_backend, torchao_backend
from trainer.fp8.layers import LayerChoice, plan_layers
from trainer.fp8.names import Backend
from trainer.model import Transformer


def weight_context(
    plan: precision.Plan, fp8_modules: list[nn.Module], mode: str
) -> Callable[[], Any]:
    """Around each micro-batch's forward and backward (a recompute reads the weights again).
    FSDP2 casts the parameters itself (MixedPrecisionPolicy.param_dtype)."""
    cast = plan.master != plan.compute and plan.config.fp8_backend == Backend.TORCHAO
    if fp8_modules and cast and mode != "fsdp":
        return lambda: torchao_backend.compute_weights(fp8_modules, plan.compute)
    return contextlib.nullcontext


def forward_context(plan: precision.Plan, device: torch.device) -> Callable[[], Any]:
    if plan.uses_fp8 and plan.config.fp8_backend == Backend.TRANSFORMER_ENGINE:

        def both() -> contextlib.ExitStack:
            stack = contextlib.ExitStack()
            stack.enter_context(precision.autocast(plan, device.type))
            stack.enter_context(te_backend.autocast(plan))
            return stack

        return both
    return lambda: precision.autocast(plan, device.type)


def apply_fp8(
    core: Transformer, plan: precision.Plan, device: torch.device, all_gather: bool
) -> list[LayerChoice]:
    mode = plan.config.fp8_size_filter
    use_filter = mode == "always" or (mode == "auto" and device.type == "cuda")
    filter_fn = (
        torchao_backend.size_filter(plan)
        if use_filter and plan.config.fp8_backend == Backend.TORCHAO
        else None
    )
    choices = plan_layers(
        core, plan.config.sensitive_layers, core.arch.n_layers, filter_fn, plan.config.fp8_recipe
    )
    names = {c.name for c in choices if c.fp8}
    if names and plan.config.fp8_backend == Backend.TRANSFORMER_ENGINE:
        te_backend.convert(core, names, plan, device)
    elif names:
        torchao_backend.convert(
            core, names, plan, emulate=device.type != "cuda", all_gather=all_gather
        )
    return choices
