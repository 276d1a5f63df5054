"""The transformer: causal, rotary, sizes as documented, FLOP count consistent with params."""

from __future__ import annotations

import pytest
import torch

from trainer.config import ModelConfig
from trainer.errors import BadInput
from trainer.model import (
    SIZES,
    Arch,
    Transformer,
    apply_rope,
    count_params,
    flops_per_token,
    resolve_arch,
    rope_tables,
)

TINY = Arch(64, 4, 4, 176, 256, 64, 10000.0, 1e-5)


def test_future_tokens_do_not_change_earlier_logits() -> None:
    torch.manual_seed(0)
    model = Transformer(TINY)
    idx = torch.randint(0, 256, (2, 16))
    changed = idx.clone()
    changed[:, 10:] = (changed[:, 10:] + 1) % 256
    a, b = model.logits(idx), model.logits(changed)
    assert torch.allclose(a[:, :10], b[:, :10], atol=1e-6)
    assert not torch.allclose(a[:, 10:], b[:, 10:])


def test_rope_keeps_norms_and_scores_depend_on_offset_only() -> None:
    cos, sin = rope_tables(TINY)
    q = torch.randn(1, 1, 1, TINY.head_dim).expand(1, 1, 32, TINY.head_dim)
    k = torch.randn(1, 1, 1, TINY.head_dim).expand(1, 1, 32, TINY.head_dim)
    rq, rk = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    assert torch.allclose(rq.norm(dim=-1), q.norm(dim=-1), atol=1e-5)
    scores = rq[0, 0] @ rk[0, 0].t()  # same vectors at every position
    assert torch.allclose(scores[5, 2], scores[20, 17], atol=1e-4)  # offset 3 both times
    assert not torch.allclose(scores[5, 2], scores[5, 4], atol=1e-4)


def test_initial_loss_is_log_vocab() -> None:
    torch.manual_seed(0)
    model = Transformer(TINY)
    idx = torch.randint(0, 256, (4, 32))
    loss = model(idx, idx)
    assert abs(loss.item() - torch.log(torch.tensor(256.0)).item()) < 0.1


@pytest.mark.parametrize("name", list(SIZES))
def test_named_sizes_are_fp8_shaped_and_roughly_their_name(name: str) -> None:
    size = SIZES[name]
    for dim in (size.dim, size.ffn_dim, size.dim // size.n_heads):
        assert dim % 16 == 0
    arch = resolve_arch(ModelConfig(size=name), vocab_size=32768)
    with torch.device("meta"):
        model = Transformer(arch)
    params = count_params(model)
    expected = {"350m": 350e6, "760m": 760e6, "1b": 1.0e9}
    if name in expected:
        assert 0.95 * expected[name] <= params <= 1.15 * expected[name]
    # 6N over the non-embedding parameters (norm gains aside) plus the attention term.
    dense = count_params(model, embeddings=False)
    attention = 12 * arch.n_layers * arch.dim * 100
    assert flops_per_token(arch, 100) - attention == pytest.approx(6 * dense, rel=0.01)


def test_bad_architectures_are_input_errors() -> None:
    with pytest.raises(BadInput, match="unknown size"):
        resolve_arch(ModelConfig(size="7b"), 256)
    with pytest.raises(BadInput, match="heads of an even size"):
        resolve_arch(ModelConfig(dim=60, n_heads=4), 256)
