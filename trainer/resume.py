"""Resuming: may this checkpoint continue this run (same model; same data, seed, batch and
precision layering unless --resume-anyway), and loading its state into model and optimizer."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from trainer import checkpoint
from trainer.config import RunConfig
from trainer.errors import BadInput
from trainer.model import Arch
from trainer.optim import AdamW
from trainer.presets import LAYERING_KEYS


def _resume_changes(loaded: checkpoint.Loaded, cfg: RunConfig, seen: dict[str, Any]) -> list[str]:
    """What differs between the checkpoint's run and this one, as `what: stored → now`."""
    meta = loaded.meta
    stored_cfg = meta["config"]
    stored = {
        "data": meta["data"],
        "train.seed": stored_cfg["train"].get("seed"),
        "train.batch_size": stored_cfg["train"].get("batch_size"),
        "data.seq_len": meta.get("seq_len", seen["data.seq_len"]),
        "world_size": meta["world_size"],
    } | {f"precision.{k}": stored_cfg["precision"].get(k) for k in LAYERING_KEYS}
    return [f"{key} {stored[key]} -> {seen[key]}" for key in stored if stored[key] != seen[key]]


def check_resume(
    loaded: checkpoint.Loaded, arch: Arch, cfg: RunConfig, seen: dict[str, Any]
) -> list[str]:
    """BadInput when the checkpoint cannot continue this run; warnings when it may, by force."""
    stored_arch = loaded.meta.get("arch")
    if stored_arch != dataclasses.asdict(arch):
        raise BadInput(
            f"checkpoint {loaded.path} was written for model {stored_arch}, this run builds "
            f"{dataclasses.asdict(arch)}; resume with the same model settings"
        )
    changes = _resume_changes(loaded, cfg, seen)
    if not changes:
        return []
    if not cfg.checkpoint.resume_anyway:
        raise BadInput(
            f"checkpoint {loaded.path} comes from a different run ({'; '.join(changes)}): "
            "continuing would not reproduce it. Resume with the same settings, or pass "
            "--resume-anyway (e.g. to finish an FP8 run that overflowed in BF16)"
        )
    return [f"--resume-anyway: continuing {loaded.path} with {'; '.join(changes)}"]


def load_state(
    loaded: checkpoint.Loaded,
    model: nn.Module,
    optimizer: AdamW,
    scaler: torch.amp.GradScaler | None,
) -> None:
    full = StateDictOptions(full_state_dict=True)
    try:
        set_model_state_dict(model, loaded.state["model"], options=full)
        set_optimizer_state_dict(model, optimizer, loaded.state["optimizer"], options=full)
        if scaler is not None and loaded.state.get("scaler"):
            scaler.load_state_dict(loaded.state["scaler"])
    except (RuntimeError, KeyError, ValueError, TypeError, IndexError) as exc:
        raise BadInput(
            f"checkpoint {loaded.path} does not fit this model ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}); it is corrupt, or from another "
            "trainer version"
        ) from exc
