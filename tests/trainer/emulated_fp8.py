"""`python -m tests.trainer.emulated_fp8 train ...`: the trainer with torchao's float8 GEMMs
emulated (`Float8LinearConfig(emulate=True)`: the casts and scales as on a GPU, the matmul in
high precision), so the preset matrix (test_trainer_preset_matrix.py) runs on the CPU in
seconds; torch._scaled_mm on the CPU is ~100x slower than a BF16 matmul. MXFP8 is emulated by
the trainer itself off CUDA. torchrun can start this module per rank (`-m
tests.trainer.emulated_fp8`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from torch import nn

from trainer.fp8 import torchao_backend

_REAL = torchao_backend.convert_float8


def emulated(model: nn.Module, layer_names: set[str], config: Any) -> None:
    _REAL(model, layer_names, dataclasses.replace(config, emulate=True))


def install() -> None:
    """Emulate torchao's float8 GEMMs in this process."""
    torchao_backend.convert_float8 = emulated


if __name__ == "__main__":
    install()
    from trainer.cli import process_main

    process_main()
