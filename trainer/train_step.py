"""One optimizer step: forward and backward over the micro-batches, unscale and clip, the stop flag
agreed across ranks (a host-side all-reduce), then the step itself. Nothing here reads a device
value back except torch's GradScaler (fp16): the loss, the norm and the scale stay on the device
for the loop's next read (trainer/step_values.py), where the health checks judge them."""

from __future__ import annotations

import contextlib

import torch

from trainer import fault, memory
from trainer.assemble import Run
from trainer.distributed import all_reduce_host, no_sync
from trainer.errors import OutOfMemory
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
            if run.fault is not None and run.fault[1] == step and run.fault[0] in ("nan", "inf"):
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
    run: Run, params: list[torch.nn.Parameter], step: int, measure: bool
) -> torch.Tensor | None:
    """The optimizer step, without reading anything back; returns the GradScaler's scale after
    it (fp16; a device tensor, judged against precision.loss_scale_floor at the next read), or
    None. A non-finite loss or norm is judged at that read too (trainer/loop.py): the step runs
    on regardless, and no checkpoint is written before the read has cleared it.

    Under fp16 GradScaler.step reads its found-inf flag on the host every step (it decides on
    the host whether optimizer.step runs): the one per-step read left, torch's own."""
    run.optimizer.measure = measure
    run.optimizer.unchanged = None  # a step the GradScaler skips measures nothing
    scale: torch.Tensor | None = None
    if run.scaler is None:
        run.optimizer.step()
    else:
        run.scaler.step(run.optimizer)
        run.scaler.update()
        scale = run.scaler._get_scale_async()
    run.optimizer.measure = False
    if run.fp8_converter is not None:
        run.fp8_converter.after_optimizer_step(run.model)
    run.optimizer.zero_grad(set_to_none=True)
    if run.fault is not None and run.fault == ("weight-nan", step):
        with torch.no_grad():
            params[0].view(-1)[0] = float("nan")
    if run.fault is not None and run.fault == ("weight-scale", step):
        layer = run.core.get_submodule(fault.scaled_layer(run.arch.n_layers))
        assert isinstance(layer, torch.nn.Linear)  # Float8Linear and FSDP2's classes are ones
        with torch.no_grad():
            layer.weight.mul_(fault.WEIGHT_SCALE)
    return scale


def agree_stop(run: Run, stop: StopRequest) -> float:
    """The number of ranks asked to stop (SIGTERM/SIGINT), agreed so that every rank stops and
    saves at the same step: a host-side all-reduce of a CPU flag (distributed.all_reduce_host),
    so no rank waits for its device's queue."""
    flag = 1.0 if stop.signum is not None else 0.0
    if not run.dist.distributed:
        return flag
    return all_reduce_host(run.dist, flag)


def out_of_memory(run: Run, step: int, exc: Exception) -> OutOfMemory:
    """The OOM with what the step was estimated to need and how to need less."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else "out of memory"
    return OutOfMemory(
        f"step {step}: out of memory on {run.device_name} ({first}); estimated "
        f"{run.mem_estimate.describe()}: "
        f"{memory.advice(run.dist.mode, run.cfg.train.activation_checkpointing)}"
    )
