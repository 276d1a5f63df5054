"""How much memory a step needs, per process, before anything is allocated.

The estimate adds what lives through a step: weights (in `master_weights`), gradients (the
same dtype), the two AdamW moments (`optimizer_state`) and DDP's gradient buckets; on top, the
larger of two phases: forward and backward (the activations autograd keeps, and a
low-precision copy of the weights when autocast or the FP8 layers cast fp32 masters, per
micro-batch) and the optimizer step (its fp32 temporaries, trainer.optim computing the update
in fp32, and on log steps the copy of the weights that counts unchanged elements). FSDP2
divides the persistent parts and the step's by the number of processes. Activations per
layer follow the model in trainer/model.py tensor by tensor (norm inputs, q/k/v with their
fp32 rotary copies, the attention output, the MLP's gate/up and product), in the spirit of
Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models"
(arXiv:2205.05198), with fused attention (no T x T score matrix), plus the logits and their
fp32 loss copies. benchmarks/memory_estimate.py holds it to the CPU allocator's peak (within
15 %). It is an estimate (allocator slack, the CUDA context and fragmentation come on top), so a run
it refuses could be forced with `train.memory_check: false`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from trainer.model import Arch
from trainer.precision import Plan

_GIB = float(1 << 30)


def _size(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def param_count(arch: Arch) -> int:
    """Parameters of trainer.model.Transformer: embedding, blocks, final norm, head."""
    d, f, v = arch.dim, arch.ffn_dim, arch.vocab_size
    per_block = 4 * d * d + 3 * d * f + 2 * d
    return 2 * v * d + arch.n_layers * per_block + d


@dataclass(frozen=True)
class Estimate:
    params: int
    weights: float  # bytes, per process
    grads: float
    optimizer: float
    step_temporaries: float  # the optimizer step's fp32 temporaries and unchanged-count copy
    compute_copies: float  # low-precision weight copies, during forward and backward
    activations: float
    buckets: float = 0.0  # DDP's gradient buckets

    @property
    def pending(self) -> float:
        """What is not allocated yet when the model is built: all but the weights."""
        return self.total - self.weights

    @property
    def total(self) -> float:
        # the activations and compute copies are freed before the optimizer step begins
        resident = self.weights + self.grads + self.optimizer + self.buckets
        return resident + max(self.activations + self.compute_copies, self.step_temporaries)

    def describe(self) -> str:
        g = _GIB
        return (
            f"{self.total / g:.1f} GiB per process (weights {self.weights / g:.1f}, "
            f"gradients {self.grads / g:.1f}, optimizer {self.optimizer / g:.1f}, "
            f"activations {self.activations / g:.1f}, compute copies "
            f"{self.compute_copies / g:.1f}, optimizer-step temporaries "
            f"{self.step_temporaries / g:.1f}"
            + (f", DDP buckets {self.buckets / g:.1f})" if self.buckets else ")")
        )


def _activation_bytes(arch: Arch, plan: Plan, tokens: int, recompute: str) -> float:
    """What autograd keeps for one micro-batch of `tokens` tokens."""
    d, f = arch.dim, arch.ffn_dim
    c = _size(plan.compute)
    a = _size(plan.activation)
    # per layer: 2 norm inputs (activation dtype) and outputs (compute), q/k/v plus fp32
    # rotary q/k, attention output, o-proj and down outputs (residual dtype), gate/up output,
    # silu(gate) and the product
    per_layer = tokens * (d * (3 * a + 6 * c + 8) + f * 4 * c)
    if plan.uses_fp8:
        per_layer += tokens * (2 * d + f)  # the FP8 copies of the Linear inputs
    layers: float
    if recompute == "full":
        layers = arch.n_layers * tokens * d * a + per_layer  # block inputs, one block live
    elif recompute == "selective":
        layers = arch.n_layers * per_layer * 0.6  # norms, rotary and activations recomputed
    else:
        layers = arch.n_layers * per_layer
    logits = tokens * arch.vocab_size * (c + 8)  # head output, fp32 copy, its gradient
    return float(layers + logits + tokens * d * (a + 4))


def estimate(
    arch: Arch, plan: Plan, *, micro: int, seq_len: int, world: int, mode: str, recompute: str
) -> Estimate:
    n = param_count(arch)
    shard = world if mode == "fsdp" else 1
    w = _size(plan.master)
    s = _size(plan.optimizer_state)
    weights = n * w / shard
    grads = n * w / shard
    optimizer = 2 * n * s / shard
    # trainer.optim: the fp32 denominator, plus fp32 copies of whatever is not fp32, plus the
    # weights' clone that counts unchanged elements on log steps
    temporaries = (n * 4 * (1 + (w != 4) * 2 + (s != 4) * 2) + n * w) / shard
    copies = n * _size(plan.compute) if plan.master != plan.compute else 0.0
    return Estimate(
        params=n,
        weights=weights,
        grads=grads,
        optimizer=optimizer,
        step_temporaries=temporaries,
        compute_copies=float(copies),
        activations=_activation_bytes(arch, plan, micro * seq_len, recompute),
        buckets=float(n * w) if mode == "ddp" else 0.0,
    )


def _cgroup_free() -> float | None:
    """memory.max - memory.current of this cgroup (v2), when a limit is set (containers)."""
    root = Path("/sys/fs/cgroup")
    try:
        limit = (root / "memory.max").read_text().strip()
        current = (root / "memory.current").read_text().strip()
    except OSError:
        return None
    if limit == "max":
        return None
    try:
        return float(int(limit) - int(current))
    except ValueError:
        return None


def _host_available() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def available(device: torch.device) -> tuple[float | None, str]:
    """Bytes this process may use on `device`, and where the figure comes from."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return float(free), f"free on {torch.cuda.get_device_name(device)}"
    figures = [x for x in (_host_available(), _cgroup_free()) if x is not None]
    if not figures:
        return None, "unknown"
    procs = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1))
    share = min(figures) / procs
    return share, "available host memory" + (f" / {procs} local processes" if procs > 1 else "")


def advice(mode: str, recompute: str) -> str:
    steps = ["lower --batch-size or raise --grad-accum (smaller micro-batches)"]
    if recompute != "full":
        steps.append("--activation-checkpointing full")
    if mode != "fsdp":
        steps.append("shard over more processes with --parallel fsdp under torchrun")
    steps.append("or a smaller --model / --seq-len")
    return ", ".join(steps)
