"""Which Linear layers run FP8: the sensitive-layer list plus CUDA's shape rules.

Sensitive entries are keywords (`embedding`, `head`, `first_block`, `last_block`) or glob
patterns over module names (`blocks.*.mlp.down`). A layer whose dims CUDA's FP8 GEMM cannot
take stays in high precision whatever the list says.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from torch import nn

from trainer.errors import BadInput
from trainer.fp8.rules import linear_problems
from trainer.fp8_names import Recipe


@dataclass(frozen=True)
class LayerChoice:
    name: str
    in_features: int
    out_features: int
    fp8: bool
    reason: str


def _patterns(entry: str, n_layers: int) -> list[str]:
    """A sensitive-list entry as glob patterns over module names."""
    keywords = {
        "embedding": ["embedding", "embedding.*"],
        "head": ["head"],
        "first_block": ["blocks.0", "blocks.0.*"],
        "last_block": [f"blocks.{n_layers - 1}", f"blocks.{n_layers - 1}.*"],
    }
    return keywords.get(entry, [entry, f"{entry}.*"])


SizeFilter = Callable[[nn.Module, str], bool]
SIZE_FILTERED = "small (size filter)"  # the reason of a layer the size filter kept


def plan_layers(
    model: nn.Module,
    sensitive: Sequence[str],
    n_layers: int,
    size_filter: SizeFilter | None = None,
    recipe: str = Recipe.TENSORWISE,
) -> list[LayerChoice]:
    """One choice per nn.Linear, in module order; every sensitive entry must match a module.

    `size_filter(module, name)` False keeps a layer in high precision as too small for FP8 to
    pay (torchao's auto-filter thresholds, measured on H100)."""
    names = [name for name, _ in model.named_modules() if name]
    entries = {entry: _patterns(entry, n_layers) for entry in sensitive}
    unmatched = [
        e
        for e, pats in entries.items()
        if not any(fnmatch.fnmatchcase(n, p) for n in names for p in pats)
    ]
    if unmatched:
        raise BadInput(
            f"precision.sensitive_layers: {', '.join(map(repr, unmatched))} match no module; "
            "use embedding, head, first_block, last_block or a glob such as blocks.*.mlp.down"
        )
    out = []
    for name, module in model.named_modules():
        if not isinstance(module, nn.Linear):
            continue
        hits = [e for e, pats in entries.items() if any(fnmatch.fnmatchcase(name, p) for p in pats)]
        shape = linear_problems(module.in_features, module.out_features, recipe)
        if hits:
            choice = LayerChoice(
                name, module.in_features, module.out_features, False, f"sensitive ({hits[0]})"
            )
        elif shape:
            choice = LayerChoice(
                name, module.in_features, module.out_features, False, "; ".join(shape)
            )
        elif size_filter is not None and not size_filter(module, name):
            choice = LayerChoice(
                name, module.in_features, module.out_features, False, SIZE_FILTERED
            )
        else:
            choice = LayerChoice(name, module.in_features, module.out_features, True, "fp8")
        out.append(choice)
    return out
