"""Learning rate: linear warmup, then cosine decay to `min_lr_ratio` of the peak at the end."""

from __future__ import annotations

import math


def default_warmup(steps: int) -> int:
    """5 % of the run, at most 1000 steps (0 for runs under 20 steps)."""
    return min(1000, steps // 20)


def lr_at(step: int, *, peak: float, steps: int, warmup: int, min_ratio: float) -> float:
    """The learning rate for optimizer step `step` (1-based) of a `steps`-step run."""
    if warmup and step <= warmup:
        return peak * step / warmup
    span = max(1, steps - warmup)
    progress = min(1.0, (step - warmup) / span)
    floor = peak * min_ratio
    return floor + (peak - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
