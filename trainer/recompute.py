"""Activation checkpointing: trade recompute for activation memory.

`full` recomputes every block in the backward. `selective` recomputes only the cheap ops of
each block (norms, rotary embeddings, activations, FP8 casts) and keeps the outputs of the
matmuls and of attention, which are expensive to redo: most of the memory saving for a small
part of the recompute (Korthikanti et al., arXiv:2205.05198). Worth it when activations are a
large share of memory (memory.py estimates them); it is off by default.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
)

from trainer.model import Transformer

_aten = torch.ops.aten
_SAVE_NAMES = (
    "mm",
    "addmm",
    "bmm",
    "_scaled_mm",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
)
# Resolved by name: not every build has every attention kernel.
SAVED_OPS = frozenset(getattr(_aten, name).default for name in _SAVE_NAMES if hasattr(_aten, name))


def _policy(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
    return CheckpointPolicy.MUST_SAVE if op in SAVED_OPS else CheckpointPolicy.PREFER_RECOMPUTE


def _selective_context() -> Any:
    return create_selective_checkpoint_contexts(_policy)  # type: ignore[no-untyped-call]


def _checkpointed(
    selective: bool, block: nn.Module, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> torch.Tensor:
    kwargs: dict[str, Any] = {"use_reentrant": False}
    if selective:
        kwargs["context_fn"] = _selective_context
    out: torch.Tensor = checkpoint(block, x, cos, sin, **kwargs)
    return out


def apply(model: Transformer, mode: str) -> None:
    """Set how each block runs: `none`, `selective` or `full` checkpointing."""
    if mode == "none":
        return
    runner = functools.partial(_checkpointed, mode == "selective")
    model.block_runners = [runner] * len(model.blocks)
