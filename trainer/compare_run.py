"""`train --compare A,B`: both presets trained side by side, so the ratio measures the presets.

- One torch.compile decision for both sides: the flag when given, else on for both when either
  side would compile alone (FP8 on CUDA). Compiling only the FP8 side reported Inductor's
  fusion gains as FP8 speed-up.
- The sides alternate every log interval (A steps 1-10, B steps 1-10, A 11-20, ...): drift of
  the machine (clocks, neighbours, caches) reaches both alike and neither always runs first.
  Both models live at once, so the second side's memory check counts what the first still
  needs; on CUDA each side's peak is the allocator's peak during its own steps minus what the
  other side holds.
- A side that stops (NaN/Inf, a spike with spike_action stop) stops alone: the other side
  finishes, and the JSON and the figure are written, naming the side, the step and the reason;
  the exit code is still 3. A signal stops both, writes what was trained and exits 128 + signal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator

import torch

from trainer import checkpoint, compare, fault, machine, precision
from trainer.config import RunConfig, with_preset
from trainer.distributed import Dist
from trainer.errors import BadInput, Interrupted, NumericalStop
from trainer.loop import Loop
from trainer.metrics import Sink
from trainer.run import start
from trainer.signals import StopRequest


def _compile_both(cfg: RunConfig, names: list[str], d: Dist) -> bool:
    """One decision for both sides: the flag, else on when either side would compile alone."""
    if cfg.train.compile is not None:
        return cfg.train.compile
    plans = [precision.resolve(with_preset(cfg, name).precision) for name in names]
    return any(machine.use_compile(None, plan, d.device) for plan in plans)


def _side_config(cfg: RunConfig, name: str, compiled: bool) -> RunConfig:
    side = with_preset(cfg, name)
    injected = fault.parse(cfg.train.inject_fault, cfg.train.steps)
    train = dataclasses.replace(
        side.train, compile=compiled, inject_fault=fault.spec_for(injected, name)
    )
    return dataclasses.replace(
        side, train=train, checkpoint=dataclasses.replace(side.checkpoint, dir=None)
    )


def _resident_bytes(loop: Loop) -> int:
    """Device bytes a side holds between its steps: weights, gradients, optimizer state."""
    tensors: list[torch.Tensor] = []
    for p in loop.run.core.parameters():
        tensors.append(p)
        if p.grad is not None:
            tensors.append(p.grad)
    for state in loop.run.optimizer.state.values():
        tensors += [v for v in state.values() if isinstance(v, torch.Tensor)]
    storages: dict[int, int] = {}
    for t in tensors:
        local = getattr(t, "to_local", lambda t=t: t)()
        if local.device.type != "cuda":
            continue
        try:
            storage = local.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
        except (RuntimeError, NotImplementedError):  # a wrapper subclass (MXFP8 weights)
            storages[id(local)] = local.numel() * local.element_size()
    return sum(storages.values())


class _Side:
    """One preset's loop, stepped a chunk at a time."""

    def __init__(self, name: str, loop: Loop) -> None:
        self.name = name
        self.loop = loop
        self.steps: Generator[int] = loop.stepping()
        self.done = False
        self.stopped_at: int | None = None  # the step a numerical stop or a signal ended it in
        self.cuda_peak = 0.0

    def advance(self, count: int, other: _Side, device: torch.device) -> None:
        """Up to `count` steps; a numerical stop ends this side only."""
        on_cuda = device.type == "cuda"
        if on_cuda:
            held_by_other = _resident_bytes(other.loop)
            torch.cuda.reset_peak_memory_stats(device)
        try:
            for _ in range(count):
                next(self.steps)
        except StopIteration:
            self.done = True
        except NumericalStop:
            self.done = True
            self.stopped_at = self.loop.step_in_flight
        if on_cuda:
            peak = torch.cuda.max_memory_allocated(device) - held_by_other
            self.cuda_peak = max(self.cuda_peak, peak / 1e9)

    def result(self, device: torch.device) -> compare.Side:
        run, outcome = self.loop.run, self.loop.outcome
        side = compare.Side.from_outcome(
            self.name,
            outcome,
            self.loop.tokens_per_step,
            run.peak_tflops,
            run.flops_per_token,
            self.stopped_at,
            fp8=any(c.fp8 for c in run.fp8_layers),
        )
        if device.type == "cuda":
            side = dataclasses.replace(side, peak_mem_gb=self.cuda_peak)
        return side


def train_compare(
    cfg: RunConfig, names: list[str], d: Dist, sink: Sink, stop: StopRequest
) -> dict[str, object]:
    """Train presets A and B from the same seed (same init, same batches), interleaved, without
    checkpoints; write the JSON and the figure; NumericalStop after writing when a side stopped."""
    if cfg.checkpoint.resume is not None:
        raise BadInput("--compare trains both presets from scratch; drop --resume")
    if cfg.metrics.profile_steps:
        raise BadInput("--profile traces one run: profile each preset on its own, not --compare")
    injected = fault.parse(cfg.train.inject_fault, cfg.train.steps)
    if injected is not None and injected.preset not in (None, *names):
        raise BadInput(
            f"--inject-fault {cfg.train.inject_fault!r} names preset {injected.preset}, which "
            f"is not one of the compared presets {', '.join(names)}"
        )
    out_dir = checkpoint.prepare_dir(cfg.checkpoint.dir or ".")
    compiled = _compile_both(cfg, names, d)
    sides: list[_Side] = []
    for name in names:
        sink.say(f"== compare: {name} ==")
        reserved = sum(s.loop.run.mem_estimate.pending for s in sides)
        loop = start(_side_config(cfg, name, compiled), d, sink, stop, name, reserved)
        sides.append(_Side(name, loop))
    a, b = sides
    chunk = cfg.log_interval
    interrupted: Interrupted | None = None
    try:
        while not (a.done and b.done):
            for side, other in ((a, b), (b, a)):
                if not side.done:
                    side.advance(chunk, other, d.device)
    except Interrupted as exc:
        interrupted = exc
        for side in sides:
            if not side.done:
                side.stopped_at = side.loop.step_in_flight
                if side.loop.outcome.status == "running":  # the side that did not see it
                    side.loop.outcome.status, side.loop.outcome.message = "interrupted", str(exc)
                side.steps.close()
    results = [side.result(d.device) for side in sides]
    summary = compare.summarize(results[0], results[1], d.device.type, chunk, compiled)
    if d.is_main:
        paths = compare.write(summary, results[0], results[1], out_dir)
        for line in compare.report(summary):
            sink.say(line)
        sink.say(f"compare: wrote {paths[0]} and {paths[1]}")
    if interrupted is not None:
        raise interrupted
    stopped = [s for s in sides if s.stopped_at is not None]
    if stopped:
        raise NumericalStop(
            "--compare: "
            + "; ".join(f"side {s.name}: {s.loop.outcome.message}" for s in stopped)
            + " (the JSON and the figure were written)"
        )
    return summary
