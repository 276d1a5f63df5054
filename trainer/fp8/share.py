"""How much of a step FP8 can speed up at most: the FP8 share of the step's FLOPs (Amdahl).

A converted Linear runs 1 (fp8-fwd: the forward), 2 (rowwise_with_gw_hp: not the weight
gradient) or 3 (fp8, MXFP8, Transformer Engine) of its three GEMMs in FP8; attention, the layers
the size filter or the sensitive list keep, and everything else stay BF16. With FP8 GEMMs at
`rate` times the BF16 rate (2 on H100/H200/B200: the datasheets' dense FP8 vs BF16 peaks,
trainer/mfu.py) and casts, norms and the rest for free, a step cannot get faster than
1 / (1 - share + share / rate). Example: the 350m model at seq 1024 with torchao's size filter
keeps 17 % of its FLOPs in FP8 GEMMs under fp8-fwd (at most x1.09) and 50 % under fp8 (x1.33).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from trainer.fp8.layers import LayerChoice

FP8_RATE_DEFAULT: Final = 2.0  # dense FP8 / BF16 tensor-core peak of Hopper and Blackwell


@dataclass(frozen=True)
class Fp8Share:
    share: float  # of the step's FLOPs, in FP8 GEMMs
    gemms: int  # per converted layer
    layers: int  # converted
    rate: float  # FP8 GEMM rate over BF16

    @property
    def ceiling(self) -> float:
        """The largest speed-up over BF16 this share allows (Amdahl)."""
        return 1.0 / (1.0 - self.share + self.share / self.rate)

    def describe(self) -> str:
        which = {1: "the forward GEMM", 2: "forward and input-gradient GEMMs"}.get(
            self.gemms, "all three GEMMs"
        )
        return (
            f"FP8 GEMMs are {self.share:.0%} of the step's FLOPs ({which} of {self.layers} "
            f"layers): at most x{self.ceiling:.2f} over BF16, even with FP8 GEMMs at "
            f"{self.rate:g}x the BF16 rate and free casts"
        )


def fp8_share(
    choices: Sequence[LayerChoice], gemms: int, flops_per_token: float, rate: float | None
) -> Fp8Share:
    """`gemms`: of each converted layer's three, how many run in FP8 (the converter's
    fp8_gemms); `flops_per_token`: the whole step's (trainer.model.flops_per_token)."""
    converted = [c for c in choices if c.fp8]
    fp8_flops = sum(2.0 * gemms * c.in_features * c.out_features for c in converted)
    share = fp8_flops / flops_per_token if flops_per_token > 0 else 0.0
    return Fp8Share(share, gemms, len(converted), rate or FP8_RATE_DEFAULT)
