"""The precision plan applied to the model: which layers become FP8 (through the plan's FP8
converter, fp8/converters.py), and the contexts around each micro-batch's forward (autocast) and
weights (casts)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from trainer import precision
from trainer.fp8.converters import Fp8Converter
from trainer.fp8.layers import LayerChoice, plan_layers
from trainer.model import Transformer


def weight_context(
    converter: Fp8Converter | None, fp8_modules: list[nn.Module]
) -> Callable[[], Any]:
    """Around each micro-batch's forward and backward (a recompute reads the weights again)."""
    if converter is None:
        return contextlib.nullcontext
    return converter.weight_context(fp8_modules)


def forward_context(
    plan: precision.Plan, converter: Fp8Converter | None, device: torch.device
) -> Callable[[], Any]:
    if converter is not None:
        return converter.forward_context(device)
    return lambda: precision.autocast(plan, device.type)


def apply_fp8(
    core: Transformer, converter: Fp8Converter, device: torch.device
) -> list[LayerChoice]:
    """Choose the FP8 layers (sensitive list, CUDA's shapes, the size filter) and convert them."""
    plan = converter.plan
    mode = plan.config.fp8_size_filter
    use_filter = mode == "always" or (mode == "auto" and device.type == "cuda")
    filter_fn = converter.size_filter() if use_filter else None
    choices = plan_layers(
        core, plan.config.sensitive_layers, core.arch.n_layers, filter_fn, plan.config.fp8_recipe
    )
    converter.convert(core, {c.name for c in choices if c.fp8}, device)
    return choices
