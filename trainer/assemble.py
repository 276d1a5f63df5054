"""Build a run from its config: every check that can fail on input happens here, in an order
that fails fast (precision → device → checkpoint dir → data → shapes) before the model exists.
The checks themselves: machine.py (device, compiler, memory), resume.py (may this checkpoint
continue this run); casting.py applies the precision plan to the model.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from trainer import casting, checkpoint, data, fault, machine, memory, precision, recompute, resume
from trainer.config import RunConfig
from trainer.distributed import Dist, wrap
from trainer.errors import BadInput
from trainer.fp8 import converters, rules
from trainer.fp8.layers import LayerChoice
from trainer.fp8.share import Fp8Share, fp8_share
from trainer.fp8.stats import Fp8Monitor
from trainer.mfu import peak_for, peak_tflops
from trainer.model import SIZES, Arch, Transformer, flops_per_token, resolve_arch
from trainer.optim import AdamW, param_groups
from trainer.presets import LAYERING_KEYS
from trainer.schedule import default_warmup


@dataclass
class Run:
    """Everything the loop needs, built and checked."""

    cfg: RunConfig
    plan: precision.Plan
    dist: Dist
    arch: Arch
    seq_len: int
    source: data.Source
    batches: data.Batches
    core: Transformer
    model: nn.Module
    optimizer: AdamW
    scaler: torch.amp.GradScaler | None
    fp8_layers: list[LayerChoice]
    fp8_monitor: Fp8Monitor | None
    forward_context: Callable[[], contextlib.AbstractContextManager[object]]
    weight_context: Callable[[], contextlib.AbstractContextManager[object]]
    ckpt_dir: Path | None
    resume: checkpoint.Loaded | None
    lr: float
    warmup: int
    device_name: str
    peak_tflops: float | None
    peak_tflops_fp8: float | None
    flops_per_token: float
    fault: tuple[str, int] | None
    mem_estimate: memory.Estimate
    compiled: bool
    fp8_converter: converters.Fp8Converter | None  # the plan's FP8 backend/recipe; None: no FP8
    fp8_share: Fp8Share | None  # the FP8 share of the step's FLOPs and the speed-up it allows
    notes: list[str]  # warnings for the start of the run (resume fallbacks and overrides)


def _parse_fault(spec: str | None, steps: int, preset: str) -> tuple[str, int] | None:
    found = fault.parse(spec, steps)
    if found is None:
        return None
    if found.preset not in (None, preset):
        raise BadInput(
            f"--inject-fault {spec!r} names preset {found.preset}, but this run trains {preset} "
            "(a preset prefix picks one side of --compare)"
        )
    return found.kind, found.step


def _open_checkpoints(
    cfg: RunConfig, d: Dist
) -> tuple[Path | None, checkpoint.Loaded | None, list[str]]:
    """The checkpoint dir (stale temp files removed by the main rank) and the checkpoint to
    resume from, with notes on the checkpoints skipped to find it."""
    ckpt_dir = checkpoint.prepare_dir(cfg.checkpoint.dir) if cfg.checkpoint.dir else None
    if ckpt_dir is not None and d.is_main:
        checkpoint.remove_stale(ckpt_dir)
    loaded: checkpoint.Loaded | None = None
    notes: list[str] = []
    if cfg.checkpoint.resume == "latest":
        if ckpt_dir is None:
            raise BadInput("--resume needs --ckpt-dir (where the checkpoints are)")
        loaded, notes = checkpoint.load_newest_valid(ckpt_dir)
    elif cfg.checkpoint.resume is not None:
        resume_path = checkpoint.find_resume(cfg.checkpoint.resume, ckpt_dir)
        loaded = checkpoint.load(resume_path) if resume_path is not None else None
    return ckpt_dir, loaded, notes


def _open_data(cfg: RunConfig) -> tuple[int, data.Source, Arch]:
    """The sequence length the model can take, the data source and the model's shape (its
    vocabulary is the data's)."""
    t = cfg.train
    if cfg.model.size not in SIZES:
        raise BadInput(
            f"model.size: unknown size {cfg.model.size!r}; choose one of {', '.join(SIZES)}"
        )
    max_seq = cfg.model.max_seq_len or SIZES[cfg.model.size].max_seq_len
    seq_len = cfg.data.seq_len or max_seq
    if seq_len > max_seq:
        raise BadInput(
            f"data.seq_len {seq_len} exceeds the model's max_seq_len {max_seq} (its rotary "
            "tables cover that many positions); lower --seq-len or raise model.max_seq_len"
        )
    source = data.open_source(
        cfg.data,
        seq_len,
        vocab_size=cfg.model.vocab_size,
        seed=t.seed,
    )
    if t.eval_interval and source.file is not None and not source.file.eval_tokens:
        raise BadInput("train.eval_interval needs a held-out split: set data.eval_fraction > 0")
    return seq_len, source, resolve_arch(cfg.model, source.vocab_size)


def _micro_batch(cfg: RunConfig, d: Dist, plan: precision.Plan, seq_len: int) -> int:
    """Sequences per micro-batch and process; FP8 gradients need a token count CUDA takes."""
    t = cfg.train
    if t.batch_size % (t.grad_accum * d.world):
        raise BadInput(
            f"train.batch_size {t.batch_size} (global) must be divisible by grad_accum "
            f"{t.grad_accum} x processes {d.world}"
        )
    micro = t.batch_size // (t.grad_accum * d.world)
    if plan.fp8_backward is not None:
        problems = rules.token_problems(micro * seq_len, plan.config.fp8_recipe)
        if problems:
            raise BadInput("FP8 gradients: " + "; ".join(problems))
    return micro


def _resume_notes(
    cfg: RunConfig,
    d: Dist,
    loaded: checkpoint.Loaded,
    arch: Arch,
    source: data.Source,
    seq_len: int,
) -> list[str]:
    """May this checkpoint continue this run: what it saw against what this run will see."""
    t = cfg.train
    seen: dict[str, Any] = {
        "data": source.fingerprint,
        "train.seed": t.seed,
        "train.batch_size": t.batch_size,
        "data.seq_len": seq_len,
        "world_size": d.world,
    } | {f"precision.{k}": getattr(cfg.precision, k) for k in LAYERING_KEYS}
    return resume.check_resume(loaded, arch, cfg, seen)


def _build_model(
    cfg: RunConfig,
    plan: precision.Plan,
    converter: converters.Fp8Converter | None,
    d: Dist,
    arch: Arch,
    use_compile: bool,
) -> tuple[Transformer, nn.Module, list[LayerChoice]]:
    """The model from the run's seed, its FP8 layers converted, activation checkpointing and
    torch.compile applied, on its device and wrapped for DDP or FSDP2."""
    torch.manual_seed(cfg.train.seed)
    core = Transformer(arch, activation_dtype=plan.activation).to(plan.master)
    fp8_layers = casting.apply_fp8(core, converter, d.device) if converter is not None else []
    recompute.apply(core, cfg.train.activation_checkpointing)
    if use_compile:
        for block in core.blocks:
            block.compile()
    core.to(d.device)
    return core, wrap(core, d, plan), fp8_layers


def _optimizer(
    cfg: RunConfig, plan: precision.Plan, core: Transformer, lr: float, d: Dist
) -> tuple[AdamW, torch.amp.GradScaler | None]:
    """AdamW over the model's parameter groups, and a GradScaler when the plan needs one."""
    t = cfg.train
    optimizer = AdamW(
        param_groups(core, t.weight_decay),
        lr=lr,
        betas=(t.beta1, t.beta2),
        eps=t.eps,
        weight_decay=t.weight_decay,
        state_dtype=plan.optimizer_state,
        stochastic_rounding=cfg.precision.stochastic_rounding,
    )
    scaler = (
        torch.amp.GradScaler(d.device.type, init_scale=cfg.precision.loss_scale_init)
        if plan.loss_scaling
        else None
    )
    return optimizer, scaler


def _batches(cfg: RunConfig, d: Dist, source: data.Source, seq_len: int) -> data.Batches:
    t = cfg.train
    return data.Batches(
        source,
        seed=t.seed,
        seq_len=seq_len,
        batch_size=t.batch_size,
        grad_accum=t.grad_accum,
        rank=d.rank,
        world=d.world,
        device=d.device,
    )


def _fp8_monitor(core: Transformer, plan: precision.Plan, names: list[str]) -> Fp8Monitor | None:
    if names and plan.fp8_forward is not None:
        return Fp8Monitor(core, names, plan.fp8_forward, plan.fp8_backward)
    return None


def assemble(cfg: RunConfig, d: Dist, reserved: float = 0.0) -> Run:
    """Check the config against the machine and the data, then build model and optimizer.
    `reserved`: bytes another live model will still need (machine.check_memory)."""
    t = cfg.train
    plan = precision.resolve(cfg.precision)
    converter = converters.for_plan(plan, d.mode)  # the one FP8 backend/recipe object
    injected = _parse_fault(t.inject_fault, t.steps, cfg.preset)
    use_compile = machine.use_compile(t.compile, plan, d.device)
    if use_compile:
        machine.check_compiler()
    device_name = machine.check_device(plan, d.device, converter)
    ckpt_dir, loaded, notes = _open_checkpoints(cfg, d)
    seq_len, source, arch = _open_data(cfg)
    micro = _micro_batch(cfg, d, plan, seq_len)
    need = memory.estimate(
        arch,
        plan,
        micro=micro,
        seq_len=seq_len,
        world=d.world,
        mode=d.mode,
        recompute=t.activation_checkpointing,
    )
    if t.memory_check:
        machine.check_memory(need, d, t.activation_checkpointing, reserved)
    if loaded is not None:
        notes += _resume_notes(cfg, d, loaded, arch, source, seq_len)

    core, model, fp8_layers = _build_model(cfg, plan, converter, d, arch, use_compile)
    lr = t.lr if t.lr is not None else SIZES[cfg.model.size].lr
    optimizer, scaler = _optimizer(cfg, plan, core, lr, d)
    if loaded is not None:
        resume.load_state(loaded, core, model, optimizer, scaler)

    fp8_names = [c.name for c in fp8_layers if c.fp8]
    peak = peak_for(device_name) if d.device.type == "cuda" else None
    step_flops = flops_per_token(arch, seq_len)
    fp8_rate = peak.fp8 / peak.bf16 if peak and peak.fp8 else None
    return Run(
        cfg=cfg,
        plan=plan,
        dist=d,
        arch=arch,
        seq_len=seq_len,
        source=source,
        batches=_batches(cfg, d, source, seq_len),
        core=core,
        model=model,
        optimizer=optimizer,
        scaler=scaler,
        fp8_layers=fp8_layers,
        fp8_monitor=_fp8_monitor(core, plan, fp8_names),
        forward_context=casting.forward_context(plan, converter, d.device),
        weight_context=casting.weight_context(
            converter, [core.get_submodule(n) for n in fp8_names]
        ),
        ckpt_dir=ckpt_dir,
        resume=loaded,
        lr=lr,
        warmup=t.warmup_steps if t.warmup_steps is not None else default_warmup(t.steps),
        device_name=device_name,
        peak_tflops=t.peak_tflops
        or (
            peak_tflops(peak, plan.compute, tf32=torch.backends.cuda.matmul.allow_tf32)
            if peak
            else None
        ),
        peak_tflops_fp8=peak.fp8 if peak and plan.uses_fp8 else None,
        flops_per_token=step_flops,
        fault=injected,
        mem_estimate=need,
        compiled=use_compile,
        fp8_converter=converter,
        fp8_share=(
            fp8_share(fp8_layers, converter.fp8_gemms, step_flops, fp8_rate)
            if converter is not None
            else None
        ),
        notes=notes,
    )
