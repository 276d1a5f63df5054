"""Resuming: may this checkpoint continue this run, and loading its state into model and optimizer.

Refused (exit 2) unless --resume-anyway: another model (always refused), other data (the
content fingerprint: size and the first and last MiB, wherever the file is mounted), seed,
batch, sequence length, precision layering or world size, and a changed learning-rate schedule
(train.steps stretches the cosine: resuming step 500 of 1000 with --steps 2000 jumps the LR from
0.55 to 0.87 of its peak). Every other changed train/precision/health setting (weight decay,
betas, sensitive layers, the FP8 recipe, ...) is continued with a warning naming it. Before the
state is loaded the checkpoint's model keys must be the model's (a missing tensor would
otherwise keep its fresh initialisation), and after it each AdamW moment must have its
parameter's shape.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Final

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
from trainer.model import SIZES, Arch
from trainer.optim import AdamW
from trainer.presets import LAYERING_KEYS
from trainer.schedule import default_warmup

# the learning-rate schedule: a change moves the LR of every remaining step
SCHEDULE_KEYS: Final = ("train.steps", "train.lr", "train.warmup_steps", "train.min_lr_ratio")
# compared in _run_identity (refused), or not about the numbers at all: never warned about
_NOT_WARNED: Final = frozenset(
    {
        "train.seed",
        "train.batch_size",
        "train.stop_at",
        "train.eval_interval",
        "train.eval_batches",
        "train.device",
        "train.parallel",
        "train.compile",
        "train.activation_checkpointing",
        "train.memory_check",
        "train.inject_fault",
        "train.peak_tflops",
        "precision.checkpoint_interval",
        *SCHEDULE_KEYS,
        *(f"precision.{k}" for k in LAYERING_KEYS),
    }
)
_WARNED_SECTIONS: Final = ("train", "precision", "health")


def _same_data(stored: Any, now: dict[str, Any]) -> tuple[bool, str | None]:
    """Whether the checkpoint's data is this run's, and a note for a checkpoint written before
    data was fingerprinted by content (path and size: matched by kind and size only)."""
    if isinstance(stored, dict) and "path" in stored and "ends_sha256" not in stored:
        same = stored.get("kind") == now.get("kind") and stored.get("bytes") == now.get("bytes")
        return same, "an older checkpoint fingerprinted the data by path and size: matched by size"
    return stored == now, None


def _resolved_schedule(cfg: dict[str, Any]) -> dict[str, Any]:
    """The schedule's keys as the run used them (an unset LR is the size's; unset warmup 5 %)."""
    train = cfg.get("train", {})
    size = cfg.get("model", {}).get("size")
    steps = train.get("steps")
    lr = train.get("lr")
    if lr is None and size in SIZES:
        lr = SIZES[size].lr
    warmup = train.get("warmup_steps")
    if warmup is None and isinstance(steps, int):
        warmup = default_warmup(steps)
    return {
        "train.steps": steps,
        "train.lr": lr,
        "train.warmup_steps": warmup,
        "train.min_lr_ratio": train.get("min_lr_ratio"),
    }


def _run_identity(
    loaded: checkpoint.Loaded, cfg: RunConfig, seen: dict[str, Any]
) -> tuple[list[str], list[str]]:
    """What differs that a resume must not silently accept, as `what: stored -> now`; notes."""
    meta = loaded.meta
    stored_cfg = meta["config"]
    same_data, note = _same_data(meta["data"], seen["data"])
    stored = {
        "train.seed": stored_cfg["train"].get("seed"),
        "train.batch_size": stored_cfg["train"].get("batch_size"),
        "data.seq_len": meta.get("seq_len", seen["data.seq_len"]),
        "world_size": meta["world_size"],
    } | {f"precision.{k}": stored_cfg["precision"].get(k) for k in LAYERING_KEYS}
    changes = [] if same_data else [f"data {meta['data']} -> {seen['data']}"]
    changes += [f"{key} {stored[key]} -> {seen[key]}" for key in stored if stored[key] != seen[key]]
    before, now = _resolved_schedule(stored_cfg), _resolved_schedule(cfg.to_dict())
    changes += [f"{key} {before[key]} -> {now[key]}" for key in before if before[key] != now[key]]
    return changes, [note] if note else []


def _other_changes(loaded: checkpoint.Loaded, cfg: RunConfig) -> list[str]:
    """Every other train/precision/health setting that changed, for a warning."""
    stored_cfg, now = loaded.meta["config"], cfg.to_dict()
    out = []
    for section in _WARNED_SECTIONS:
        before = stored_cfg.get(section) or {}
        for key, value in now[section].items():
            name = f"{section}.{key}"
            if name not in _NOT_WARNED and key in before and before[key] != value:
                out.append(f"{name} {before[key]} -> {value}")
    return out


def check_resume(
    loaded: checkpoint.Loaded, arch: Arch, cfg: RunConfig, seen: dict[str, Any]
) -> list[str]:
    """BadInput when the checkpoint cannot continue this run; warnings when it may."""
    stored_arch = loaded.meta.get("arch")
    if stored_arch != dataclasses.asdict(arch):
        raise BadInput(
            f"checkpoint {loaded.path} was written for model {stored_arch}, this run builds "
            f"{dataclasses.asdict(arch)}; resume with the same model settings"
        )
    changes, notes = _run_identity(loaded, cfg, seen)
    others = _other_changes(loaded, cfg)
    if others:
        notes.append(f"resuming {loaded.path} with changed settings: {'; '.join(others)}")
    if not changes:
        return notes
    if not cfg.checkpoint.resume_anyway:
        raise BadInput(
            f"checkpoint {loaded.path} comes from a different run ({'; '.join(changes)}): "
            "continuing would not reproduce it. Resume with the same settings, or pass "
            "--resume-anyway (e.g. to finish an FP8 run that overflowed in BF16)"
        )
    return [f"--resume-anyway: continuing {loaded.path} with {'; '.join(changes)}", *notes]


def _model_key_problem(stored: dict[str, Any], core: nn.Module) -> str | None:
    expected = set(core.state_dict())
    missing, unexpected = sorted(expected - set(stored)), sorted(set(stored) - expected)
    parts = []
    for what, keys in (("lacks", missing), ("has unknown", unexpected)):
        if keys:
            shown = ", ".join(keys[:4]) + (f" and {len(keys) - 4} more" if len(keys) > 4 else "")
            parts.append(f"{what} model tensor(s) {shown}")
    return "; ".join(parts) or None


def _moment_problem(optimizer: AdamW) -> str | None:
    for group in optimizer.param_groups:
        for p in group["params"]:
            for key in ("exp_avg", "exp_avg_sq"):
                moment = optimizer.state.get(p, {}).get(key)
                if moment is not None and moment.shape != p.shape:
                    shapes = f"{tuple(moment.shape)} for a parameter of shape {tuple(p.shape)}"
                    return f"optimizer {key} of shape {shapes}"
    return None


def check_rng(state: dict[str, Any]) -> None:
    """The RNG states load into fresh generators (a tampered state is exit 2, not a
    traceback at the first step)."""
    try:
        torch.Generator().set_state(state["torch"])
        random.Random().setstate(  # noqa: S311 - a state check, not randomness
            (state["python"][0], tuple(state["python"][1]), state["python"][2])
        )
    except (RuntimeError, TypeError, ValueError) as exc:
        raise BadInput(
            f"the checkpoint's RNG state does not load ({type(exc).__name__}: {exc})"
        ) from exc


def load_state(
    loaded: checkpoint.Loaded,
    core: nn.Module,
    model: nn.Module,
    optimizer: AdamW,
    scaler: torch.amp.GradScaler | None,
) -> None:
    """Model (keys checked first), optimizer (moment shapes checked after), scaler, RNGs."""
    problem = _model_key_problem(loaded.state["model"], core)
    if problem is not None:
        raise BadInput(
            f"checkpoint {loaded.path} does not fit this model: it {problem}; it is corrupt, or "
            "from another trainer version"
        )
    full = StateDictOptions(full_state_dict=True)
    try:
        set_model_state_dict(model, loaded.state["model"], options=full)
        set_optimizer_state_dict(model, optimizer, loaded.state["optimizer"], options=full)
        if scaler is not None and loaded.state.get("scaler"):
            scaler.load_state_dict(loaded.state["scaler"])
        problem = _moment_problem(optimizer)
        if problem is None:
            check_rng(loaded.state["rng"])
    except BadInput as exc:
        problem = str(exc)
    except (RuntimeError, KeyError, ValueError, TypeError, IndexError) as exc:
        problem = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    if problem is not None:
        raise BadInput(
            f"checkpoint {loaded.path} does not fit this model ({problem}); it is corrupt, or "
            "from another trainer version"
        )
