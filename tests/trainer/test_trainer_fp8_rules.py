"""CUDA's FP8 rules enforced on every device, GPU capability checks, the sensitive-layer list."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trainer.config import PrecisionConfig
from trainer.errors import BadInput
from trainer.fp8 import converters, rules
from trainer.fp8.layers import plan_layers
from trainer.model import Arch, Transformer
from trainer.precision import resolve

ONE = torch.ones((), dtype=torch.float32)


def _fp8(rows: int, cols: int, dtype: torch.dtype = torch.float8_e4m3fn) -> torch.Tensor:
    return torch.randn(rows, cols).to(dtype)


def test_cpu_scaled_mm_accepts_what_cuda_refuses() -> None:
    """The reason the trainer checks shapes itself: each call below runs on the CPU, and
    `scaled_mm_problems` says why CUDA would refuse it."""
    a, b = _fp8(8, 40), _fp8(24, 40)
    out = torch._scaled_mm(a, b.t(), scale_a=ONE, scale_b=ONE, out_dtype=torch.bfloat16)
    assert out.shape == (8, 24)
    assert rules.scaled_mm_problems(40, 24) == [
        "inner dim 40 is not a multiple of 16",
        "output dim 24 is not a multiple of 16",
    ]
    a5, b5 = _fp8(16, 32, torch.float8_e5m2), _fp8(16, 32, torch.float8_e5m2)
    torch._scaled_mm(a5, b5.t(), scale_a=ONE, scale_b=ONE, out_dtype=torch.bfloat16)
    assert rules.scaled_mm_problems(32, 16, torch.float8_e5m2, torch.float8_e5m2) == [
        "both operands are e5m2"
    ]
    row_major = _fp8(32, 16)  # (K, N) row-major: CUDA wants the second operand column-major
    torch._scaled_mm(_fp8(16, 32), row_major, scale_a=ONE, scale_b=ONE, out_dtype=torch.bfloat16)
    assert rules.scaled_mm_problems(32, 16, b_column_major=False) == [
        "the second operand is not column-major"
    ]
    assert rules.scaled_mm_problems(32, 48) == []


def test_torchao_on_cpu_converts_a_misshapen_layer_but_the_trainer_keeps_it_bf16(
    torchao: None,
) -> None:
    plan = resolve(PrecisionConfig())
    raw = nn.Sequential(nn.Linear(40, 24, bias=False)).to(torch.bfloat16)
    converter = converters.for_plan(plan, "none")
    assert converter is not None
    converter.convert(raw, {"0"}, torch.device("cpu"))  # torchao alone: converts, runs on a CPU
    assert type(raw[0]).__name__ == "Float8Linear"
    raw(torch.randn(4, 40, dtype=torch.bfloat16)).float().sum().backward()

    arch = Arch(
        dim=40,
        n_layers=3,
        n_heads=4,
        ffn_dim=72,
        vocab_size=64,
        max_seq_len=16,
        rope_theta=10000.0,
        norm_eps=1e-5,
    )
    choices = plan_layers(Transformer(arch), sensitive=[], n_layers=3)
    assert choices and not any(c.fp8 for c in choices)
    assert all("not a multiple of 16" in c.reason for c in choices)


def test_default_sensitive_layers_keep_head_and_first_and_last_block() -> None:
    arch = Arch(64, 4, 4, 176, 256, 64, 10000.0, 1e-5)
    model = Transformer(arch)
    choices = {c.name: c for c in plan_layers(model, PrecisionConfig().sensitive_layers, 4)}
    assert not choices["head"].fp8 and "head" in choices["head"].reason
    assert not choices["blocks.0.attn.qkv"].fp8 and not choices["blocks.3.mlp.down"].fp8
    assert choices["blocks.1.attn.qkv"].fp8 and choices["blocks.2.mlp.down"].fp8
    globbed = {c.name: c for c in plan_layers(model, ["blocks.*.mlp.down"], 4)}
    assert not globbed["blocks.1.mlp.down"].fp8 and globbed["blocks.1.mlp.gate_up"].fp8
    assert globbed["head"].fp8
    with pytest.raises(BadInput, match="match no module"):
        plan_layers(model, ["blocks.*.mlp.dwon"], 4)


@pytest.mark.parametrize(
    ("name", "cc", "recipe", "ok"),
    [
        ("NVIDIA A100-SXM4-80GB", (8, 0), "tensorwise", False),
        ("Tesla T4", (7, 5), "tensorwise", False),
        ("NVIDIA L40S", (8, 9), "tensorwise", True),
        ("NVIDIA L40S", (8, 9), "rowwise", True),
        ("NVIDIA H100 80GB HBM3", (9, 0), "rowwise", True),
        ("NVIDIA B200", (10, 0), "rowwise_with_gw_hp", True),
        ("NVIDIA GeForce RTX 5090", (12, 0), "tensorwise", True),
        ("NVIDIA GeForce RTX 5090", (12, 0), "rowwise", False),
        ("NVIDIA GB10", (12, 1), "rowwise", False),
    ],
)
def test_device_checks_name_the_gpu_and_its_capability(
    name: str, cc: tuple[int, int], recipe: str, ok: bool
) -> None:
    problem = rules.device_problem(name, cc, recipe)
    assert (problem is None) == ok
    if problem is not None:
        assert name in problem and f"{cc[0]}.{cc[1]}" in problem and f"sm_{cc[0]}{cc[1]}" in problem


def test_fp8_gradients_need_token_counts_that_are_multiples_of_16() -> None:
    assert rules.token_problems(8 * 64) == []
    assert "not a multiple of 16" in rules.token_problems(3 * 7)[0]
