"""FP8 through NVIDIA Transformer Engine, when it is installed (CUDA only).

TE casts forward and backward (E4M3, or HYBRID: E4M3 forward, E5M2 gradients) with delayed
per-tensor scaling; it cannot keep the backward in BF16, so `fp8-fwd` needs torchao. The chosen
nn.Linear layers become te.pytorch.Linear with the same weights; the forward runs inside TE's
autocast context (`te.pytorch.autocast`, or `fp8_autocast` in older releases).
"""

from __future__ import annotations

import contextlib
import importlib
from typing import Any

import torch
from torch import nn

from trainer.errors import BadInput
from trainer.precision import Plan


def load() -> Any:
    try:
        return importlib.import_module("transformer_engine.pytorch")
    except ImportError as exc:
        raise BadInput(
            f"fp8_backend transformer_engine: Transformer Engine is not importable ({exc}); "
            "use fp8_backend torchao"
        ) from exc


def recipe(plan: Plan) -> Any:
    common = importlib.import_module("transformer_engine.common.recipe")
    fmt = common.Format.HYBRID if plan.fp8_backward == torch.float8_e5m2 else common.Format.E4M3
    return common.DelayedScaling(fp8_format=fmt)


def convert(model: nn.Module, layer_names: set[str], plan: Plan, device: torch.device) -> nn.Module:
    """Replace the named nn.Linear layers by te.pytorch.Linear holding the same weights."""
    if device.type != "cuda":
        raise BadInput("fp8_backend transformer_engine runs on CUDA devices only")
    te = load()
    for name in sorted(layer_names):
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        old = getattr(parent, child)
        new = te.Linear(
            old.in_features, old.out_features, bias=False, params_dtype=plan.master, device=device
        )
        with torch.no_grad():
            new.weight.copy_(old.weight)
        setattr(parent, child, new)
    return model


def autocast(plan: Plan) -> contextlib.AbstractContextManager[object]:
    te = load()
    if hasattr(te, "autocast"):
        ctx: contextlib.AbstractContextManager[object] = te.autocast(
            enabled=True, recipe=recipe(plan)
        )
    else:
        ctx = te.fp8_autocast(enabled=True, fp8_recipe=recipe(plan))
    return ctx
