"""The state a checkpoint holds beyond model and optimizer (RNGs, the loop's health counters), and
writing it: refused when a weight went NaN/Inf, gathered by every rank, written by rank 0."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

import torch
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
)

from trainer import checkpoint
from trainer.assemble import Run
from trainer.distributed import all_reduce
from trainer.errors import NumericalStop


def rng_state() -> dict[str, Any]:
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "python": random.getstate(),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    """The CUDA states only onto as many GPUs as saved them (another node shape starts those
    generators from their seeds; the trainer draws nothing random on the GPU but stochastic
    rounding's noise)."""
    torch.set_rng_state(state["torch"])
    cuda = state.get("cuda") or []
    if cuda and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda)
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))


def plain(value: Any) -> Any:
    """State with tensor subclasses unwrapped (torchao's MXFP8 weight wrapper keeps the real
    tensor in `_data`), so `torch.load(weights_only=True)` can read the checkpoint."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    inner = getattr(value, "_data", None)
    if isinstance(value, torch.Tensor) and type(value) is not torch.Tensor and inner is not None:
        return plain(inner)
    return value


def check_finite(run: Run, step: int, last_checkpoint: str | None) -> None:
    """A checkpoint of NaN weights would be a trap: every resume would start from it."""
    tensors: list[torch.Tensor] = list(run.core.parameters())
    for state in run.optimizer.state.values():
        tensors += [v for v in state.values() if isinstance(v, torch.Tensor)]
    local = [getattr(t, "to_local", lambda t=t: t)() for t in tensors]
    # the optimizer's step counters live on the CPU, the rest on the device: one flag each,
    # gathered on the device (torch.stack takes no CPU tensor beside device tensors)
    device = run.dist.device
    flags = [(~torch.isfinite(t).all()).to(device) for t in local if t.is_floating_point()]
    count = all_reduce(torch.stack(flags).sum().float()).item()
    if count:
        kept = last_checkpoint or "none was written yet"
        raise NumericalStop(
            f"step {step}: {int(count)} weight/optimizer tensor(s) hold NaN or Inf after the "
            f"optimizer step, so no checkpoint was written (the last one is {kept}). Resume "
            "from it with a lower lr, a BF16 preset (--forward-matmul bf16) or more layers "
            "in precision.sensitive_layers."
        )


def save(
    run: Run, step: int, loop_state: dict[str, Any], last_checkpoint: str | None
) -> Path | None:
    """Collective under FSDP2 (every rank gathers), written by rank 0 only: the path written
    there, None on the other ranks and without a checkpoint dir. `loop_state`: the loop's
    health, grad norms and skipped steps, stored beside model, optimizer, scaler and RNGs."""
    if run.ckpt_dir is None:
        return None
    check_finite(run, step, last_checkpoint)
    full = StateDictOptions(full_state_dict=True, cpu_offload=True)
    model_sd = get_model_state_dict(run.model, options=full)
    optim_sd = get_optimizer_state_dict(run.model, run.optimizer, options=full)
    if not run.dist.is_main:
        return None
    state = {
        "model": plain(model_sd),
        "optimizer": plain(optim_sd),
        "scaler": run.scaler.state_dict() if run.scaler is not None else {},
        "rng": rng_state(),
        "data_position": {"step": step, "samples": step * run.cfg.train.batch_size},
    } | loop_state
    meta = {
        "config": run.cfg.to_dict(),
        "arch": dataclasses.asdict(run.arch),
        "data": run.source.fingerprint,
        "world_size": run.dist.world,
        "seq_len": run.seq_len,
    }
    return checkpoint.save(run.ckpt_dir, step, state, meta, run.cfg.checkpoint.keep_last)
