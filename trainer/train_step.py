"""One optimizer step: forward and backward over the micro-batches, unscale and clip, the loss and
stop flag agreed across ranks (one all-reduce), health checks, then the step itself."""

from __future__ import annotations

import contextlib
import math

import torch

from trainer import health, memory
from trainer.assemble import Run
from trainer.distributed import all_reduce, no_sync
from trainer.errors import NumericalStop, OutOfMemory
from trainer.signals import StopRequest


def _eager(on: bool) -> contextlib.AbstractContextManager[object]:
    """The FP8 monitor's hooks do not run inside compiled blocks (Dynamo skips hooks added
    after compiling): the monitored micro-batch runs eagerly, its statistics are the step's."""
    if not on:
        return contextlib.nullcontext()
    stance: contextlib.AbstractContextManager[object] = torch.compiler.set_stance("force_eager")
    return stance


def backward(
    run: Run, params: list[torch.nn.Parameter], step: int, lr: float, arm: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward and backward over the micro-batches; returns (mean loss, grad norm)."""
    accum = run.cfg.train.grad_accum
    loss_sum = torch.zeros((), device=run.dist.device)
    for group in run.optimizer.param_groups:
        group["lr"] = lr
    for micro in range(accum):
        armed = arm and micro == 0 and run.fp8_monitor is not None
        if armed:
            assert run.fp8_monitor is not None
            run.fp8_monitor.arm()
        x, y = run.batches.train(step, micro)
        with run.weight_context(), _eager(armed and run.compiled):
            with no_sync(run.model, micro == accum - 1), run.forward_context():
                loss = run.model(x, y)
            if run.fault is not None and run.fault[1] == step and run.fault[0] != "weight-nan":
                loss = loss * float(run.fault[0])
            loss_sum += loss.detach().float()
            scaled = loss / accum
            (run.scaler.scale(scaled) if run.scaler is not None else scaled).backward()
        if armed:
            assert run.fp8_monitor is not None
            run.fp8_monitor.disarm()
    if run.scaler is not None:
        run.scaler.unscale_(run.optimizer)
    clip = run.cfg.train.grad_clip or float("inf")
    norm = torch.nn.utils.clip_grad_norm_(params, clip, foreach=True)
    full_tensor = getattr(norm, "full_tensor", None)
    if callable(full_tensor):
        norm = full_tensor()
    return loss_sum / accum, norm.float()


def optimizer_step(
    run: Run,
    params: list[torch.nn.Parameter],
    step: int,
    loss: float,
    grad_norm: float,
    measure: bool,
) -> bool:
    """Health checks and the optimizer step; True when the GradScaler skipped it (overflow)."""
    skipped = False
    run.optimizer.measure = measure
    run.optimizer.unchanged = None  # a step the GradScaler skips measures nothing
    if run.scaler is None:
        health.check_finite(step, loss, grad_norm)
        run.optimizer.step()
    else:
        health.check_finite(step, loss, 0.0)
        if not math.isfinite(grad_norm):
            skipped = True
        run.scaler.step(run.optimizer)
        run.scaler.update()
        scale = float(run.scaler.get_scale())
        if scale < run.cfg.precision.loss_scale_floor:
            raise NumericalStop(
                f"step {step}: loss scale fell to {scale:g}, below precision.loss_scale_floor "
                f"{run.cfg.precision.loss_scale_floor:g}: fp16 gradients keep overflowing"
            )
    run.optimizer.measure = False
    if run.fp8_converter is not None:
        run.fp8_converter.after_optimizer_step(run.model)
    run.optimizer.zero_grad(set_to_none=True)
    if run.fault is not None and run.fault == ("weight-nan", step):
        with torch.no_grad():
            params[0].view(-1)[0] = float("nan")
    return skipped


def agree(run: Run, stop: StopRequest, loss: torch.Tensor) -> tuple[float, float]:
    """The mean loss over ranks and the number of ranks asked to stop (one all-reduce)."""
    flag = 1.0 if stop.signum is not None else 0.0
    if not run.dist.distributed:
        return loss.item(), flag
    shared = torch.stack([loss, torch.tensor(flag, device=loss.device)])
    all_reduce(shared)
    return shared[0].item() / run.dist.world, shared[1].item()


def out_of_memory(run: Run, step: int, exc: Exception) -> OutOfMemory:
    """The OOM with what the step was estimated to need and how to need less."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else "out of memory"
    return OutOfMemory(
        f"step {step}: out of memory on {run.device_name} ({first}); estimated "
        f"{run.mem_estimate.describe()}: "
        f"{memory.advice(run.dist.mode, run.cfg.train.activation_checkpointing)}"
    )
