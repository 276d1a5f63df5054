"""One training run, or the two of an A/B comparison, from a resolved config."""

from __future__ import annotations

import dataclasses
import gc

import torch

from trainer import banner, checkpoint, compare
from trainer.assemble import assemble
from trainer.config import RunConfig, with_preset
from trainer.distributed import Dist
from trainer.errors import BadInput
from trainer.loop import Loop
from trainer.metrics import Sink
from trainer.outcome import Outcome
from trainer.signals import StopRequest


def _start(cfg: RunConfig, d: Dist, sink: Sink, stop: StopRequest, label: str | None) -> Loop:
    run = assemble(cfg, d)
    for line in banner.lines(run):
        sink.say(line)
    for line in banner.warnings(run):
        sink.warn(line)
    return Loop(run, sink, stop, label, keep_curve=label is not None)


def train(cfg: RunConfig, d: Dist, sink: Sink, stop: StopRequest) -> Outcome:
    loop = _start(cfg, d, sink, stop, None)
    outcome = loop.train()
    tps = outcome.tokens_per_s(loop.tokens_per_step)
    final = outcome.final_loss
    wall = outcome.tokens / d.world / outcome.wall_s if outcome.wall_s > 0 else 0.0
    sink.say(
        f"done: {outcome.status} at step {outcome.step}, loss {final:.4f}, "
        f"{tps or 0:,.0f} tok/s/dev steady, {wall:,.0f} wall-clock (all included), "
        f"{outcome.wall_s:.1f} s"
        if final is not None
        else f"done: the checkpoint is at step {outcome.step}; nothing left to train"
    )
    return outcome


def train_compare(
    cfg: RunConfig, names: list[str], d: Dist, sink: Sink, stop: StopRequest
) -> dict[str, object]:
    """Train presets A and B from the same seed (same init, same batches), no checkpoints."""
    if cfg.checkpoint.resume is not None:
        raise BadInput("--compare trains both presets from scratch; drop --resume")
    out_dir = checkpoint.prepare_dir(cfg.checkpoint.dir or ".")
    runs: dict[str, compare.Side] = {}
    for name in names:
        side_cfg = with_preset(cfg, name)
        side_cfg = dataclasses.replace(
            side_cfg, checkpoint=dataclasses.replace(side_cfg.checkpoint, dir=None)
        )
        if d.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(d.device)
        sink.say(f"== compare: {name} ==")
        loop = _start(side_cfg, d, sink, stop, name)
        outcome = loop.train()
        runs[name] = compare.Side.from_outcome(
            name, outcome, loop.tokens_per_step, loop.run.peak_tflops, loop.run.flops_per_token
        )
        del loop
        gc.collect()
        if d.device.type == "cuda":
            torch.cuda.empty_cache()
    summary = compare.summarize(runs[names[0]], runs[names[1]], d.device.type)
    if d.is_main:
        paths = compare.write(summary, runs[names[0]], runs[names[1]], out_dir)
        for line in compare.report(summary):
            sink.say(line)
        sink.say(f"compare: wrote {paths[0]} and {paths[1]}")
    return summary
