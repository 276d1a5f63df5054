"""The start-of-run lines: what was built, so a log says what ran without the config file."""

from __future__ import annotations

import torch

from trainer import __version__
from trainer.assemble import Run
from trainer.fp8.layers import SIZE_FILTERED, LayerChoice
from trainer.model import count_params
from trainer.presets import LAYERING_KEYS


def _kept(choices: list[LayerChoice]) -> list[str]:
    """The layers left in high precision, grouped by reason ("sensitive (head): head")."""
    by_reason: dict[str, list[str]] = {}
    for c in choices:
        if not c.fp8:
            by_reason.setdefault(c.reason, []).append(c.name)
    out = []
    for reason, names in by_reason.items():
        shown = ", ".join(names[:3]) + (f" +{len(names) - 3} more" if len(names) > 3 else "")
        out.append(f"{reason}: {shown}")
    return out


def _no_fp8_layer(choices: list[LayerChoice]) -> str:
    """Why FP8 was asked for and nothing converted: name the size filter when it did it."""
    filtered = [c for c in choices if c.reason == SIZE_FILTERED]
    if filtered:
        return (
            f"FP8 was asked for but torchao's size filter kept all {len(filtered)} candidate "
            "layers in BF16 (their GEMMs are too small for FP8 to beat BF16 on an H100), the "
            "others are sensitive or misshapen: this run is BF16. Use a larger model, or "
            "precision.fp8_size_filter never to convert them anyway"
        )
    return "FP8 was asked for but no layer qualifies (all sensitive or misshapen): this run is BF16"


def lines(run: Run) -> list[str]:
    cfg, arch, b, p = run.cfg, run.arch, run.batches, run.plan.config
    params = count_params(run.core)
    layering = ", ".join(f"{k} {getattr(p, k)}" for k in LAYERING_KEYS)
    out = [
        f"trainer {__version__} | torch {torch.__version__} | {run.device_name} | "
        f"{run.dist.world} process(es), {run.dist.mode if run.dist.distributed else 'single'}",
        f"model {cfg.model.size}: {arch.n_layers} layers, dim {arch.dim}, {arch.n_heads} heads, "
        f"ffn {arch.ffn_dim}, vocab {arch.vocab_size}, {params / 1e6:.2f}M params",
        f"data {run.source.description} | seq {run.seq_len} x batch {cfg.train.batch_size} "
        f"(micro {b.micro}, accum {b.grad_accum}) | lr {run.lr:g}, warmup {run.warmup}",
        f"precision {cfg.preset}: {layering}",
    ]
    converter = run.fp8_converter
    if converter is not None:
        fp8 = [c for c in run.fp8_layers if c.fp8]
        kept = _kept(run.fp8_layers)
        out.append(
            f"fp8: {len(fp8)}/{len(run.fp8_layers)} linear layers via {converter.describe()}; "
            f"kept in high precision: {'; '.join(kept) or 'none'}"
            + ("; FSDP2 float8 all-gather" if converter.fsdp_float8_all_gather else "")
        )
    if run.fp8_share is not None and run.fp8_share.layers:
        out.append(f"fp8 ceiling: {run.fp8_share.describe()}")
    if cfg.train.activation_checkpointing != "none" or run.compiled:
        out.append(
            f"activation checkpointing {cfg.train.activation_checkpointing} | "
            f"torch.compile {'on' if run.compiled else 'off'}"
        )
    if run.resume is not None:
        out.append(f"resumed from {run.resume.path} (step {run.resume.step})")
    return out


def warnings(run: Run) -> list[str]:
    """Start-of-run warnings: settings that run but probably not as the user meant."""
    out = list(run.notes)
    if run.plan.uses_fp8 and not any(c.fp8 for c in run.fp8_layers):
        out.append(_no_fp8_layer(run.fp8_layers))
    if any(c.fp8 for c in run.fp8_layers) and not run.compiled:
        where = "on this CPU" if run.dist.device.type == "cpu" else "here"
        out.append(
            f"FP8 runs EAGER {where} (no torch.compile): torchao's casts do not fuse, and eager "
            "FP8 is often slower than BF16 (pytorch/ao#2262, #1199); use --compile with a C "
            "compiler on PATH for speed"
        )
    p = run.plan.config
    if p.master_weights == "bf16" and not p.stochastic_rounding:
        out.append(
            "master_weights bf16 without stochastic rounding: an update below half a bf16 ulp "
            "(2**-9 of the weight) is lost; use master_weights fp32 (the presets' default) or "
            "precision.stochastic_rounding true. The train records' unchanged_frac shows the loss"
        )
    return out
