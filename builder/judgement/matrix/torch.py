"""Rules about the cell's torch build: published for its CUDA, and for its Python."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

from builder.facts import cuda as cuda_rules
from builder.facts import torch_builds
from builder.judgement.finding import Finding
from builder.judgement.registry import check
from builder.judgement.severity import BLOCK, OK
from builder.matrix.model import Cell


@check("torch.build", "matrix")
def _torch_build(cell: Cell, today: dt.date) -> Iterator[Finding]:
    """torch is published for the cell's accelerator (cu128, cu130, cu132 or CPU)"""
    if cell.accelerator == "cpu":
        yield Finding("torch.build", OK, f"torch {cell.torch} is a CPU build", subject="torch")
        return
    assert cell.cuda is not None
    tag = cuda_rules.cuda_tag(cell.cuda.version)
    src = (torch_builds.build_source(tag),)
    minors = torch_builds.builds_of(tag)
    if not minors:
        yield Finding(
            "torch.build",
            BLOCK,
            f"no torch release is known to be published as a {tag} build (CUDA "
            f"{cell.cuda.version}); the rules know "
            f"{', '.join(sorted(torch_builds.known_builds()))} builds",
            sources=src,
            subject="cuda",
        )
    elif not torch_builds.has_build(cell.torch, tag):
        yield Finding(
            "torch.build",
            BLOCK,
            f"torch {cell.torch.public} has no {tag} build ({tag} wheels exist for "
            f"{', '.join(minors)})",
            sources=src,
            subject="torch",
        )
    else:
        yield Finding(
            "torch.build",
            OK,
            f"torch {cell.torch} is published for {tag}",
            sources=src,
            subject="torch",
        )


@check("torch.python", "matrix")
def _torch_python(cell: Cell, today: dt.date) -> Iterator[Finding]:
    """torch ships a wheel for the cell's Python"""
    tags = torch_builds.python_tags(cell.torch)
    src = (torch_builds.PYTHON_TAGS_SOURCE,)
    if tags is None:
        yield Finding(
            "torch.python",
            BLOCK,
            f"no facts about which Pythons torch {cell.torch.public} supports "
            f"(known: {', '.join(torch_builds.PYTHON_TAGS)})",
            sources=src,
            subject="torch",
        )
    elif cell.python not in tags:
        yield Finding(
            "torch.python",
            BLOCK,
            f"torch {cell.torch.public} ships wheels for Python {', '.join(tags)}, "
            f"not {cell.python}",
            sources=src,
            subject="python",
        )
    else:
        yield Finding(
            "torch.python",
            OK,
            f"torch {cell.torch.public} ships a cp{cell.python.replace('.', '')} wheel",
            sources=src,
            subject="python",
        )
