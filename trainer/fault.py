"""`--inject-fault [PRESET:]KIND@STEP`: a fault on purpose, to prove the numerical stops end to end.

KIND is `nan`/`inf` (the loss at STEP), `weight-nan` (a weight after STEP's optimizer step) or
`weight-scale` (one layer's weight multiplied by WEIGHT_SCALE after STEP's optimizer step: a
wrong scale on one layer, which trains on without a numerical stop; the quality gate,
trainer/gate.py, must fail it).
With a PRESET prefix only runs of that preset are hit: in `--compare A,B` that is one side (how
an A/B whose FP8 side diverges is tested); a single run must be of that preset.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from trainer.errors import BadInput

_SPEC: Final = re.compile(
    r"^(?:(?P<preset>[a-z0-9][a-z0-9-]*):)?(?P<kind>nan|inf|weight-nan|weight-scale)@(?P<step>\d+)$"
)

WEIGHT_SCALE: Final = 8.0  # weight-scale: three powers of two off, as a wrong FP8 scale would be


def scaled_layer(n_layers: int) -> str:
    """The layer weight-scale hits: the middle block's QKV projection, a layer every FP8 preset
    runs in FP8 under the default sensitive layers (not the first or last block)."""
    return f"blocks.{n_layers // 2}.attn.qkv"


@dataclass(frozen=True)
class Fault:
    kind: str  # nan, inf, weight-nan, weight-scale
    step: int
    preset: str | None  # None: every run


def parse(spec: str | None, steps: int) -> Fault | None:
    """The fault `spec` describes (None without one); BadInput for a malformed spec."""
    if spec is None:
        return None
    m = _SPEC.match(spec)
    if not m or not 1 <= int(m.group("step")) <= steps:
        raise BadInput(
            f"--inject-fault {spec!r}: expected [PRESET:]nan@STEP, inf@STEP (the loss) or "
            f"weight-nan@STEP (a weight after the optimizer step), weight-scale@STEP (one layer's "
            f"weight x{WEIGHT_SCALE:g}), STEP in 1..{steps}"
        )
    return Fault(m.group("kind"), int(m.group("step")), m.group("preset"))


def spec_for(fault: Fault | None, preset: str) -> str | None:
    """The spec a run of `preset` gets: the fault without its prefix, or None when the fault
    names another preset."""
    if fault is None or fault.preset not in (None, preset):
        return None
    return f"{fault.kind}@{fault.step}"
