"""Rules about the cell's FP8 backend: torchao pairs with its torch; Transformer Engine builds."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

from builder.facts import torch_builds
from builder.judgement.finding import Finding
from builder.judgement.registry import check
from builder.judgement.severity import BLOCK, OK
from builder.matrix.model import Cell


@check("fp8.torchao", "matrix")
def _fp8_torchao(cell: Cell, today: dt.date) -> Iterator[Finding]:
    """fp8 torchao: a torchao release pairs with the cell's torch"""
    if cell.fp8 != "torchao":
        return
    ao = torch_builds.torchao_for(cell.torch)
    src = (torch_builds.TORCHAO_SOURCE,)
    if ao is None:
        yield Finding(
            "fp8.torchao",
            BLOCK,
            f"no torchao release is known to pair with torch {cell.torch.public}",
            sources=src,
            subject="torch",
        )
    else:
        yield Finding(
            "fp8.torchao",
            OK,
            f"torchao {ao} pairs with torch {cell.torch.public}",
            sources=src,
            subject="fp8",
        )


@check("fp8.transformer-engine", "matrix")
def _fp8_transformer_engine(cell: Cell, today: dt.date) -> Iterator[Finding]:
    """fp8 transformer-engine: a cuda devel cell, whose toolkit builds its extension"""
    if cell.fp8 != "transformer-engine":
        return
    src = (torch_builds.TRANSFORMER_ENGINE_SOURCE,)
    if cell.accelerator != "cuda" or cell.flavour != "devel":
        yield Finding(
            "fp8.transformer-engine",
            BLOCK,
            "Transformer Engine compiles its PyTorch extension against the CUDA "
            "toolkit: it needs a cuda accelerator and the devel flavour",
            sources=src,
            subject="fp8",
        )
    else:
        yield Finding(
            "fp8.transformer-engine",
            OK,
            "Transformer Engine builds against this devel image's CUDA",
            sources=src,
            subject="fp8",
        )
