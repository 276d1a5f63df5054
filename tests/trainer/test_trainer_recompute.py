"""Activation checkpointing: the same gradients, and `selective` recomputes no matmul."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from trainer import recompute
from trainer.model import Arch, Transformer

ARCH = Arch(64, 4, 4, 176, 256, 32, 10000.0, 1e-5)
MATMULS = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default}


class CountMatmuls(TorchDispatchMode):  # type: ignore[no-untyped-call]
    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if func in MATMULS:
            self.count += 1
        return func(*args, **(kwargs or {}))


def _grads_and_backward_matmuls(mode: str) -> tuple[list[torch.Tensor], int]:
    torch.manual_seed(0)
    model = Transformer(ARCH)
    recompute.apply(model, mode)
    idx = torch.randint(0, 256, (2, 32))
    loss = model(idx, idx)
    with CountMatmuls() as counter:
        loss.backward()
    return [p.grad.clone() for p in model.parameters() if p.grad is not None], counter.count


@pytest.mark.integration
def test_checkpointing_modes_agree_and_differ_in_recompute() -> None:
    ref, none_mm = _grads_and_backward_matmuls("none")
    full, full_mm = _grads_and_backward_matmuls("full")
    selective, sel_mm = _grads_and_backward_matmuls("selective")
    for a, b, c in zip(ref, full, selective, strict=True):
        assert torch.allclose(a, b, atol=1e-6) and torch.allclose(a, c, atol=1e-6)
    assert full_mm > none_mm  # full recomputes each block's forward matmuls
    assert sel_mm == none_mm  # selective keeps matmul outputs: only cheap ops rerun


@pytest.mark.parametrize("mode", ["none", "selective", "full"])
def test_modes_set_the_block_runners(mode: str) -> None:
    model = Transformer(ARCH)
    before = list(model.block_runners)
    recompute.apply(model, mode)
    assert (model.block_runners == before) == (mode == "none")
