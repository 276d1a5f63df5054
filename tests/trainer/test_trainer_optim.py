"""AdamW with its own state precision, and the learning-rate schedule."""

from __future__ import annotations

import itertools

import pytest
import torch

from trainer.optim import AdamW
from trainer.schedule import default_warmup, lr_at


def _params(dtype: torch.dtype) -> list[torch.nn.Parameter]:
    torch.manual_seed(0)
    return [
        torch.nn.Parameter(torch.randn(8, 4).to(dtype)),
        torch.nn.Parameter(torch.randn(4).to(dtype)),
    ]


def _run(opt: torch.optim.Optimizer, params: list[torch.nn.Parameter], steps: int) -> None:
    for i in range(steps):
        for p in params:
            p.grad = torch.full_like(p, 0.1 * (i + 1)) * torch.sign(p.detach().float()).to(p.dtype)
        opt.step()


def test_matches_torch_adamw_in_fp32() -> None:
    ours, ref = _params(torch.float32), _params(torch.float32)
    kw = {"lr": 1e-2, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1}
    _run(AdamW(ours, state_dtype=torch.float32, **kw), ours, 5)  # type: ignore[arg-type]
    _run(torch.optim.AdamW(ref, **kw), ref, 5)  # type: ignore[arg-type]
    for a, b in zip(ours, ref, strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_fp32_state_under_bf16_weights_survives_a_state_dict_round_trip() -> None:
    params = _params(torch.bfloat16)
    opt = AdamW(
        params, lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0, state_dtype=torch.float32
    )
    _run(opt, params, 3)
    state = opt.state[params[0]]
    assert state["exp_avg"].dtype == torch.float32 and params[0].dtype == torch.bfloat16
    saved = opt.state_dict()
    fresh = AdamW(
        params, lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0, state_dtype=torch.float32
    )
    fresh.load_state_dict(saved)
    # torch.optim.Optimizer.load_state_dict alone would cast these to bf16.
    restored = fresh.state[params[0]]
    assert restored["exp_avg"].dtype == torch.float32
    assert torch.equal(restored["exp_avg_sq"], state["exp_avg_sq"])
    assert float(restored["step"]) == 3


def test_bf16_state_is_stored_in_bf16() -> None:
    params = _params(torch.float32)
    opt = AdamW(
        params, lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0, state_dtype=torch.bfloat16
    )
    _run(opt, params, 2)
    assert opt.state[params[0]]["exp_avg_sq"].dtype == torch.bfloat16


def test_schedule_warms_up_then_decays_to_the_floor() -> None:
    kw = {"peak": 1.0, "steps": 100, "warmup": 10, "min_ratio": 0.1}
    assert lr_at(1, **kw) == pytest.approx(0.1)  # type: ignore[arg-type]
    assert lr_at(10, **kw) == pytest.approx(1.0)  # type: ignore[arg-type]
    decay = [lr_at(s, **kw) for s in range(10, 101)]  # type: ignore[arg-type]
    assert all(a >= b for a, b in itertools.pairwise(decay))
    assert decay[-1] == pytest.approx(0.1)
    assert default_warmup(8) == 0 and default_warmup(1000) == 50 and default_warmup(10**6) == 1000
