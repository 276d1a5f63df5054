"""A compact decoder-only transformer: RMSNorm, rotary embeddings, gated (SwiGLU) MLP.

Sizes run from a CPU test model to about 1B parameters. Every Linear's dims are multiples of
16 in the named sizes, so all of them can take FP8; norms, rotary embeddings, the softmax and
the loss run in fp32 whatever the precision config says (their reductions and exponentials lose
accuracy in low precision).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import torch
import torch.nn.functional as F
from torch import nn

from trainer.config import ModelConfig
from trainer.errors import BadInput


@dataclass(frozen=True)
class Size:
    dim: int
    n_layers: int
    n_heads: int
    ffn_dim: int
    max_seq_len: int
    lr: float


# ffn_dim is about 8/3 * dim (the SwiGLU convention), rounded to a multiple of 16.
SIZES: Final = {
    "tiny": Size(dim=64, n_layers=4, n_heads=4, ffn_dim=176, max_seq_len=64, lr=3e-3),
    "small": Size(dim=256, n_layers=6, n_heads=8, ffn_dim=688, max_seq_len=256, lr=1e-3),
    "125m": Size(dim=768, n_layers=12, n_heads=12, ffn_dim=2048, max_seq_len=1024, lr=6e-4),
    "350m": Size(dim=1024, n_layers=24, n_heads=16, ffn_dim=2736, max_seq_len=2048, lr=3e-4),
    "760m": Size(dim=1536, n_layers=24, n_heads=16, ffn_dim=4096, max_seq_len=2048, lr=2.5e-4),
    "1b": Size(dim=2048, n_layers=18, n_heads=16, ffn_dim=5504, max_seq_len=2048, lr=2e-4),
}


@dataclass(frozen=True)
class Arch:
    """A fully resolved architecture."""

    dim: int
    n_layers: int
    n_heads: int
    ffn_dim: int
    vocab_size: int
    max_seq_len: int
    rope_theta: float
    norm_eps: float

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads


def resolve_arch(cfg: ModelConfig, vocab_size: int) -> Arch:
    """`cfg` with unset fields filled from its named size; `vocab_size` comes from the data."""
    if cfg.size not in SIZES:
        raise BadInput(f"model.size: unknown size {cfg.size!r}; choose one of {', '.join(SIZES)}")
    base = SIZES[cfg.size]

    def chosen(value: int | None, default: int) -> int:
        return default if value is None else value  # 0 is a value (refused below), not unset

    arch = Arch(
        dim=chosen(cfg.dim, base.dim),
        n_layers=chosen(cfg.n_layers, base.n_layers),
        n_heads=chosen(cfg.n_heads, base.n_heads),
        ffn_dim=chosen(cfg.ffn_dim, base.ffn_dim),
        vocab_size=chosen(cfg.vocab_size, vocab_size),
        max_seq_len=chosen(cfg.max_seq_len, base.max_seq_len),
        rope_theta=cfg.rope_theta,
        norm_eps=cfg.norm_eps,
    )
    for name in ("dim", "n_layers", "n_heads", "ffn_dim", "vocab_size", "max_seq_len"):
        if getattr(arch, name) < 1:
            raise BadInput(f"model.{name}: must be at least 1, got {getattr(arch, name)}")
    if arch.dim % arch.n_heads or arch.head_dim % 2:
        raise BadInput(
            f"model: dim {arch.dim} must split into {arch.n_heads} heads of an even size "
            "(rotary embeddings rotate pairs)"
        )
    return arch


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (normed * self.weight.float()).to(x.dtype)


def rope_tables(arch: Arch) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin, shape (max_seq_len, head_dim / 2), in fp32."""
    half = arch.head_dim // 2
    inv_freq = 1.0 / (arch.rope_theta ** (torch.arange(half, dtype=torch.float64) / half))
    angles = torch.outer(torch.arange(arch.max_seq_len, dtype=torch.float64), inv_freq)
    return angles.cos().float(), angles.sin().float()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate (B, H, T, D) by position, in fp32, pairing dimension i with i + D/2."""
    seq = x.shape[-2]
    xf = x.float()
    x1, x2 = xf.chunk(2, dim=-1)
    c, s = cos[:seq], sin[:seq]
    return torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, arch: Arch) -> None:
        super().__init__()
        self.n_heads = arch.n_heads
        self.qkv = nn.Linear(arch.dim, 3 * arch.dim, bias=False)
        self.proj = nn.Linear(arch.dim, arch.dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.n_heads, d // self.n_heads).unbind(2)
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out: torch.Tensor = self.proj(y.transpose(1, 2).reshape(b, t, d))
        return out


class GatedMLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x)), with gate and up as one Linear (one FP8 cast)."""

    def __init__(self, arch: Arch) -> None:
        super().__init__()
        self.gate_up = nn.Linear(arch.dim, 2 * arch.ffn_dim, bias=False)
        self.down = nn.Linear(arch.ffn_dim, arch.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        out: torch.Tensor = self.down(F.silu(gate) * up)
        return out


class Block(nn.Module):
    def __init__(self, arch: Arch) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(arch.dim, arch.norm_eps)
        self.attn = Attention(arch)
        self.mlp_norm = RMSNorm(arch.dim, arch.norm_eps)
        self.mlp = GatedMLP(arch)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), cos, sin)
        out: torch.Tensor = x + self.mlp(self.mlp_norm(x))
        return out


BlockRunner = Callable[[nn.Module, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def _run_block(
    block: nn.Module, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> torch.Tensor:
    out: torch.Tensor = block(x, cos, sin)
    return out


class Transformer(nn.Module):
    """Token ids in, mean next-token cross-entropy (fp32) out."""

    rope_cos: torch.Tensor
    rope_sin: torch.Tensor

    def __init__(self, arch: Arch, activation_dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.arch = arch
        self.activation_dtype = activation_dtype
        self.embedding = nn.Embedding(arch.vocab_size, arch.dim)
        self.blocks = nn.ModuleList(Block(arch) for _ in range(arch.n_layers))
        self.norm = RMSNorm(arch.dim, arch.norm_eps)
        self.head = nn.Linear(arch.dim, arch.vocab_size, bias=False)
        cos, sin = rope_tables(arch)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        # Per block: plain call or an activation-checkpointing wrapper (trainer.recompute).
        self.block_runners: list[BlockRunner] = [_run_block] * arch.n_layers
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """N(0, 0.02), residual projections scaled by 1/sqrt(2 * n_layers) (GPT-2)."""
        residual_std = 0.02 / math.sqrt(2 * self.arch.n_layers)
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                std = residual_std if name.endswith(("attn.proj", "mlp.down")) else 0.02
                nn.init.normal_(module.weight, mean=0.0, std=std)

    def logits(self, idx: torch.Tensor) -> torch.Tensor:
        """(B, T) token ids to (B, T, vocab) next-token logits."""
        cos, sin = self.rope_cos, self.rope_sin
        x = self.embedding(idx).to(self.activation_dtype)
        for block, run in zip(self.blocks, self.block_runners, strict=True):
            x = run(block, x, cos, sin)
        out: torch.Tensor = self.head(self.norm(x))
        return out

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = self.logits(idx)
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


def count_params(model: nn.Module, *, embeddings: bool = True) -> int:
    """Parameters (full, unsharded); without `embeddings` the input embedding is left out."""
    total = 0
    for name, p in model.named_parameters():
        if not embeddings and name.endswith("embedding.weight"):
            continue
        total += p.numel()
    return total


def flops_per_token(arch: Arch, seq_len: int) -> float:
    """Training FLOPs per token: 6 N (dense matmuls, N without the input embedding) plus
    12 L d T for attention scores and values (PaLM appendix B)."""
    per_layer = 4 * arch.dim * arch.dim + 3 * arch.dim * arch.ffn_dim
    n = arch.n_layers * per_layer + arch.dim * arch.vocab_size
    return 6.0 * n + 12.0 * arch.n_layers * arch.dim * seq_len
