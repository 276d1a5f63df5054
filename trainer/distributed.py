"""Processes, devices and parallel wrappers: single process, DDP or FSDP2 under torchrun.

torchrun sets WORLD_SIZE/RANK/LOCAL_RANK; the backend is NCCL on GPUs and gloo on CPUs (which
is how the tests run two processes on one machine). Gradient sync follows `grad_sync`: a DDP
communication hook casts buckets to that dtype for the all-reduce, and FSDP2's
MixedPrecisionPolicy takes it as `reduce_dtype` (with `param_dtype` the matmul dtype, so the
sharded master weights stay in `master_weights`).

No `from __future__ import annotations` here: DDP inspects a comm hook's annotations at
registration and refuses string annotations.
"""

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.distributed as dist
from torch import nn
from torch._C._distributed_c10d import GradBucket
from torch.nn.parallel import DistributedDataParallel

from trainer.config import TrainConfig
from trainer.errors import BadInput, Interrupted, NumericalStop, TrainerError
from trainer.precision import Plan

TrainerErrorT = TypeVar("TrainerErrorT", bound=BaseException)


@dataclass(frozen=True)
class Dist:
    rank: int
    world: int
    local_rank: int
    device: torch.device
    mode: str  # none | ddp | fsdp
    # a gloo group for host-side agreements under NCCL (the stop flag each step); None: the
    # default group, already gloo on CPUs
    host_group: Any = None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world > 1


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, str(default))
    try:
        return int(raw)
    except ValueError as exc:
        raise BadInput(f"environment {name}={raw!r} is not an integer") from exc


def resolve_device(name: str, local_rank: int) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise BadInput(f"--device {name!r}: not a device name (cpu, cuda, cuda:N, auto)") from exc
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise BadInput(f"--device {name}: CUDA is not available (torch {torch.__version__})")
        index = local_rank if device.index is None else device.index
        if index >= torch.cuda.device_count():
            raise BadInput(f"--device {name}: only {torch.cuda.device_count()} GPU(s) visible")
        device = torch.device("cuda", index)
    elif device.type != "cpu":
        raise BadInput(f"--device {name}: only cpu and cuda are supported")
    return device


def init(cfg: TrainConfig) -> Dist:
    """Join the torchrun process group (if any) and pick this process's device."""
    world = _env_int("WORLD_SIZE", 1)
    rank, local_rank = _env_int("RANK", 0), _env_int("LOCAL_RANK", 0)
    device = resolve_device(cfg.device, local_rank)
    mode = cfg.parallel
    if world == 1:
        mode = "none"
    elif mode == "none":
        raise BadInput(f"train.parallel none, but torchrun started {world} processes")
    elif mode == "auto":
        mode = "ddp"
    if world > 1 and not dist.is_initialized():
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    host_group = dist.new_group(backend="gloo") if world > 1 and device.type != "cpu" else None
    return Dist(rank, world, local_rank, device, mode, host_group)


_EVERY_RANK = "_trainimg_raised_on_every_rank"


def on_every_rank(exc: TrainerErrorT) -> TrainerErrorT:
    """Mark an error that every rank raises at the same point (after an agreement)."""
    setattr(exc, _EVERY_RANK, True)
    return exc


def raised_on_every_rank(exc: BaseException) -> bool:
    """Whether every rank ends on this error: a stop signal (voted on every step), a numerical
    stop (judged on the all-reduced loss and norms), or one marked by on_every_rank. Any other
    error (out of memory, a bug) may be one rank's alone."""
    return isinstance(exc, Interrupted | NumericalStop) or bool(getattr(exc, _EVERY_RANK, False))


def agree_written(d: Dist, failure: TrainerError | None) -> None:
    """After a checkpoint: every rank waits until rank 0 has written it, and when the write
    failed (disk full) every rank stops with exit 2, instead of ranks 1..N leaving rank 0
    alone with the write (a scheduler that kills the job when the first task ends would kill
    it mid-write) or waiting for a rank 0 that is gone."""
    if d.distributed:
        flag = torch.tensor([0.0 if failure is None else 1.0], device=d.device)
        all_reduce(flag)
        if flag.item() and failure is None:
            failure = BadInput("rank 0 could not write the checkpoint (its message says why)")
    if failure is not None:
        raise on_every_rank(failure)


def finish(every_rank: bool) -> None:
    """Leave the process group at the end of a run. On a path every rank took (finished,
    stopped, numerical stop): a barrier, so no rank leaves while another still writes the last
    checkpoint or sits in a collective, then destroy the group. On a path of one rank alone
    neither: the others would never arrive; torchrun stops them when this rank exits."""
    if dist.is_initialized() and every_rank:
        dist.barrier()
        dist.destroy_process_group()


CommHook = Callable[[Any, GradBucket], torch.futures.Future[torch.Tensor]]


def _allreduce_in(dtype: torch.dtype) -> CommHook:
    """A DDP comm hook that averages each bucket in `dtype` and writes it back."""

    def hook(state: Any, bucket: GradBucket) -> torch.futures.Future[torch.Tensor]:
        buffer: torch.Tensor = bucket.buffer()
        wire = buffer.to(dtype).div_(dist.get_world_size())
        work = dist.all_reduce(wire, async_op=True)
        assert work is not None
        fut: torch.futures.Future[list[torch.Tensor]] = work.get_future()

        def done(f: torch.futures.Future[list[torch.Tensor]]) -> torch.Tensor:
            buffer.copy_(f.value()[0])
            return buffer

        return fut.then(done)

    return hook


def wrap(model: nn.Module, d: Dist, plan: Plan) -> nn.Module:
    """DDP or FSDP2 around `model` (already on its device); the model itself when single."""
    if d.mode == "ddp":
        ddp = DistributedDataParallel(
            model, device_ids=[d.device.index] if d.device.type == "cuda" else None
        )
        if plan.grad_sync != plan.master:
            ddp.register_comm_hook(None, _allreduce_in(plan.grad_sync))
        return ddp
    if d.mode == "fsdp":
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        if plan.loss_scaling:
            raise BadInput("fp16 with a GradScaler is not supported with FSDP2; use DDP or bf16")
        policy = MixedPrecisionPolicy(
            param_dtype=plan.compute if plan.compute != plan.master else None,
            reduce_dtype=plan.grad_sync,
        )
        for block in model.blocks:  # type: ignore[union-attr]
            fully_shard(block, mp_policy=policy)
        fully_shard(model, mp_policy=policy)
    return model


def no_sync(model: nn.Module, sync: bool) -> contextlib.AbstractContextManager[object]:
    """Skip the gradient all-reduce on accumulation micro-batches (DDP and FSDP2)."""
    if isinstance(model, DistributedDataParallel) and not sync:
        return model.no_sync()
    set_sync = getattr(model, "set_requires_gradient_sync", None)
    if callable(set_sync):
        set_sync(sync)
    return contextlib.nullcontext()


def all_reduce_host(d: Dist, value: float) -> float:
    """The sum of a host value over ranks, through gloo on CPU tensors: the hosts agree without
    waiting for any device's queue (an NCCL all-reduce read back would drain it)."""
    flag = torch.tensor([value], dtype=torch.float64)
    if dist.is_initialized():
        dist.all_reduce(flag, group=d.host_group)
    return float(flag[0])


def all_reduce(t: torch.Tensor, op: str = "sum") -> torch.Tensor:
    """In place across ranks (a no-op in a single process)."""
    if dist.is_initialized():
        dist.all_reduce(t, op=dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX)
    return t
