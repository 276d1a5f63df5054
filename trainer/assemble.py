"""Build a run from its config: every check that can fail on input happens here, in an order
that fails fast (precision → device → checkpoint dir → data → shapes) before the model exists.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from trainer import checkpoint, data, memory, precision, recompute
from trainer.config import RunConfig
from trainer.distributed import Dist, wrap
from trainer.errors import BadInput
from trainer.fp8 import rules, te_backend, torchao_backend
from trainer.fp8.layers import LayerChoice, plan_layers
from trainer.fp8.stats import Fp8Monitor
from trainer.mfu import peak_for, peak_tflops
from trainer.model import SIZES, Arch, Transformer, flops_per_token, resolve_arch
from trainer.optim import AdamW, param_groups
from trainer.presets import LAYERING_KEYS
from trainer.schedule import default_warmup

_FAULT = re.compile(r"^(nan|inf|weight-nan)@(\d+)$")


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
    fp8_all_gather: bool  # FSDP2 float8 all-gather: precompute the scales after each step
    notes: list[str]  # warnings for the start of the run (resume fallbacks and overrides)


def cpu_scaled_mm() -> bool:
    """Whether this torch build runs torch._scaled_mm on the CPU (torch >= 2.13 does)."""
    try:
        a = torch.zeros(16, 16).to(torch.float8_e4m3fn)
        one = torch.ones((), dtype=torch.float32)
        torch._scaled_mm(a, a.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    except (RuntimeError, NotImplementedError, AttributeError):
        return False
    return True


def _check_device(plan: precision.Plan, device: torch.device) -> str:
    """The device's name; BadInput when it cannot run this precision plan."""
    if device.type == "cpu":
        if plan.uses_fp8:
            if plan.config.fp8_backend == "transformer_engine":
                raise BadInput("fp8_backend transformer_engine runs on CUDA devices only")
            if not cpu_scaled_mm():
                raise BadInput(
                    f"FP8 on the CPU needs torch._scaled_mm for CPU tensors (torch >= 2.13); "
                    f"this is torch {torch.__version__}. Use --preset bf16"
                )
        return "cpu"
    name = torch.cuda.get_device_name(device)
    cc = torch.cuda.get_device_capability(device)
    if plan.compute == torch.bfloat16 and cc < (8, 0):
        raise BadInput(
            f"bf16 needs compute capability 8.0 or newer; {name} has {cc[0]}.{cc[1]} "
            f"(sm_{cc[0]}{cc[1]}). Use --preset fp16"
        )
    if plan.uses_fp8:
        problem = rules.device_problem(name, cc, plan.config.fp8_recipe)
        if problem:
            raise BadInput(problem)
    return name


def has_compiler() -> bool:
    return bool(os.environ.get("CC")) or any(shutil.which(cc) for cc in ("cc", "gcc", "clang"))


def _use_compile(asked: bool | None, plan: precision.Plan, device: torch.device) -> bool:
    """`train.compile` unset: on for FP8 on CUDA when a C compiler exists. torchao's FP8 casts
    are separate kernels in eager mode and only fuse under torch.compile; users report eager
    FP8 slower than BF16 (pytorch/ao#2262, pytorch/ao#1199)."""
    if asked is not None:
        return asked
    return plan.uses_fp8 and device.type == "cuda" and has_compiler()


def _check_compiler() -> None:
    """torch.compile builds C code at run time (Inductor's CPU kernels, Triton's GPU launcher)."""
    if has_compiler():
        return
    raise BadInput(
        "train.compile needs a C compiler (Inductor's CPU kernels and Triton's launcher are "
        "built at run time) and there is none on PATH (or in CC); use a devel image or drop "
        "--compile"
    )


def _parse_fault(spec: str | None, steps: int) -> tuple[str, int] | None:
    if spec is None:
        return None
    m = _FAULT.match(spec)
    if not m or not 1 <= int(m.group(2)) <= steps:
        raise BadInput(
            f"--inject-fault {spec!r}: expected nan@STEP, inf@STEP (the loss) or weight-nan@STEP "
            f"(a weight after the optimizer step), STEP in 1..{steps}"
        )
    return m.group(1), int(m.group(2))


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


def _check_resume(
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


def _load_state(
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


def _check_memory(need: memory.Estimate, d: Dist, recompute: str) -> None:
    have, where = memory.available(d.device)
    if have is not None and need.total > have:
        raise BadInput(
            f"this configuration needs about {need.describe()}, more than the "
            f"{have / (1 << 30):.1f} GiB {where}: "
            f"{memory.advice(d.mode, recompute)}. (train.memory_check false skips "
            "this check)"
        )


def _weight_context(
    plan: precision.Plan, fp8_modules: list[nn.Module], mode: str
) -> Callable[[], Any]:
    """Around each micro-batch's forward and backward (a recompute reads the weights again).
    FSDP2 casts the parameters itself (MixedPrecisionPolicy.param_dtype)."""
    cast = plan.master != plan.compute and plan.config.fp8_backend == "torchao"
    if fp8_modules and cast and mode != "fsdp":
        return lambda: torchao_backend.compute_weights(fp8_modules, plan.compute)
    return contextlib.nullcontext


def _forward_context(plan: precision.Plan, device: torch.device) -> Callable[[], Any]:
    if plan.uses_fp8 and plan.config.fp8_backend == "transformer_engine":

        def both() -> contextlib.ExitStack:
            stack = contextlib.ExitStack()
            stack.enter_context(precision.autocast(plan, device.type))
            stack.enter_context(te_backend.autocast(plan))
            return stack

        return both
    return lambda: precision.autocast(plan, device.type)


def _apply_fp8(
    core: Transformer, plan: precision.Plan, device: torch.device, all_gather: bool
) -> list[LayerChoice]:
    mode = plan.config.fp8_size_filter
    use_filter = mode == "always" or (mode == "auto" and device.type == "cuda")
    filter_fn = (
        torchao_backend.size_filter(plan)
        if use_filter and plan.config.fp8_backend == "torchao"
        else None
    )
    choices = plan_layers(
        core, plan.config.sensitive_layers, core.arch.n_layers, filter_fn, plan.config.fp8_recipe
    )
    names = {c.name for c in choices if c.fp8}
    if names and plan.config.fp8_backend == "transformer_engine":
        te_backend.convert(core, names, plan, device)
    elif names:
        torchao_backend.convert(
            core, names, plan, emulate=device.type != "cuda", all_gather=all_gather
        )
    return choices


def assemble(cfg: RunConfig, d: Dist) -> Run:
    """Check the config against the machine and the data, then build model and optimizer."""
    t = cfg.train
    plan = precision.resolve(cfg.precision)
    fault = _parse_fault(t.inject_fault, t.steps)
    use_compile = _use_compile(t.compile, plan, d.device)
    if use_compile:
        _check_compiler()
    device_name = _check_device(plan, d.device)

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
    arch = resolve_arch(cfg.model, source.vocab_size)
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
        _check_memory(need, d, t.activation_checkpointing)
    seen: dict[str, Any] = {
        "data": source.fingerprint,
        "train.seed": t.seed,
        "train.batch_size": t.batch_size,
        "data.seq_len": seq_len,
        "world_size": d.world,
    } | {f"precision.{k}": getattr(cfg.precision, k) for k in LAYERING_KEYS}
    if loaded is not None:
        notes += _check_resume(loaded, arch, cfg, seen)

    torch.manual_seed(t.seed)
    core = Transformer(arch, activation_dtype=plan.activation).to(plan.master)
    all_gather = (
        plan.uses_fp8
        and plan.config.fp8_backend == "torchao"
        and torchao_backend.fsdp_float8_all_gather(plan, d.mode)
    )
    fp8_layers = _apply_fp8(core, plan, d.device, all_gather) if plan.uses_fp8 else []
    recompute.apply(core, t.activation_checkpointing)
    if use_compile:
        for block in core.blocks:
            block.compile()
    core.to(d.device)
    model = wrap(core, d, plan)

    lr = t.lr if t.lr is not None else SIZES[cfg.model.size].lr
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
    if loaded is not None:
        _load_state(loaded, model, optimizer, scaler)

    fp8_names = [c.name for c in fp8_layers if c.fp8]
    monitor = None
    if fp8_names and plan.fp8_forward is not None:
        monitor = Fp8Monitor(core, fp8_names, plan.fp8_forward, plan.fp8_backward)
    peak = peak_for(device_name) if d.device.type == "cuda" else None
    return Run(
        cfg=cfg,
        plan=plan,
        dist=d,
        arch=arch,
        seq_len=seq_len,
        source=source,
        batches=data.Batches(
            source,
            seed=t.seed,
            seq_len=seq_len,
            batch_size=t.batch_size,
            grad_accum=t.grad_accum,
            rank=d.rank,
            world=d.world,
            device=d.device,
        ),
        core=core,
        model=model,
        optimizer=optimizer,
        scaler=scaler,
        fp8_layers=fp8_layers,
        fp8_monitor=monitor,
        forward_context=_forward_context(plan, d.device),
        weight_context=_weight_context(plan, [core.get_submodule(n) for n in fp8_names], d.mode),
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
        flops_per_token=flops_per_token(arch, seq_len),
        fault=fault,
        mem_estimate=need,
        compiled=use_compile,
        fp8_all_gather=bool(all_gather) and any(c.fp8 for c in fp8_layers),
        notes=notes,
    )
