"""Numerical health: stop at the first NaN/Inf, watch for loss spikes.

A non-finite loss or gradient norm stops the run at the loop's next read of the step values (a
log, checkpoint or eval step: trainer/step_values.py), naming the step it happened in; a
checkpoint step reads before it saves, so the last checkpoint stays good. A loss far above its
running median (a spike, the usual prelude to divergence under FP8 overflow) warns, or stops if
configured; the median over a window is robust to the spike itself and to ordinary noise.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass
from typing import Any

from trainer.config import HealthConfig, PrecisionConfig
from trainer.errors import NumericalStop


def check_finite(step: int, loss: float, grad_norm: float) -> None:
    bad = [
        f"{name} is {value}"
        for name, value in (("loss", loss), ("grad norm", grad_norm))
        if not math.isfinite(value)
    ]
    if bad:
        raise NumericalStop(
            f"step {step}: {' and '.join(bad)}; no checkpoint was written after it, the last "
            "checkpoint is untouched. Resume from it with a lower lr, a BF16 preset "
            "(--forward-matmul bf16) or more layers in precision.sensitive_layers."
        )


LOST_UPDATES_WARN = 0.01
"""A step that leaves more than this fraction of weights unchanged is losing updates: the
update fell below half an ulp of the weight's storage format and rounded away."""


def lost_updates(unchanged_frac: float, p: PrecisionConfig) -> str | None:
    """A warning when a step left too many weights unchanged (None otherwise).

    With stochastic rounding an unchanged element is expected (the update rounds up with the
    probability its size warrants, so none is lost on average): no warning then.
    """
    if unchanged_frac <= LOST_UPDATES_WARN or p.stochastic_rounding:
        return None
    if p.master_weights == "fp32":  # fp32 already: only a tiny lr (or zero gradients) does it
        return (
            f"the optimizer step left {unchanged_frac:.1%} of the fp32 master weights "
            "unchanged: the updates are below half an fp32 ulp (2**-24 of the weight) or "
            "the gradients are zero; check the lr and its schedule"
        )
    return (
        f"the optimizer step left {unchanged_frac:.1%} of the weights unchanged: updates are "
        f"being lost to rounding in master_weights {p.master_weights}; use master_weights "
        "fp32 (the presets' default), precision.stochastic_rounding true, or a higher lr"
    )


@dataclass
class Spike:
    step: int
    loss: float
    median: float

    def message(self) -> str:
        return (
            f"step {self.step}: loss {self.loss:.4f} is {self.loss / self.median:.1f}x its running "
            f"median {self.median:.4f} (loss spike)"
        )


class SpikeDetector:
    """loss > factor x median(last `window` losses) is a spike, once half the window is full."""

    def __init__(self, cfg: HealthConfig) -> None:
        self.cfg = cfg
        self.history: deque[float] = deque(maxlen=cfg.spike_window)

    def observe(self, step: int, loss: float) -> Spike | None:
        spike = None
        if self.cfg.spike_action != "off" and len(self.history) >= max(
            1, self.cfg.spike_window // 2
        ):
            median = statistics.median(self.history)
            if median > 0 and loss > self.cfg.spike_factor * median:
                spike = Spike(step, loss, median)
                if self.cfg.spike_action == "stop":
                    raise NumericalStop(spike.message() + "; health.spike_action is stop")
        self.history.append(loss)
        return spike

    def state_dict(self) -> dict[str, Any]:
        return {"history": list(self.history)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.history.extend(float(x) for x in state.get("history", []))
