"""One training run from a resolved config (--compare: trainer/compare_run.py)."""

from __future__ import annotations

from trainer import banner
from trainer.assemble import assemble
from trainer.config import RunConfig
from trainer.distributed import Dist
from trainer.loop import Loop
from trainer.metrics import Sink
from trainer.outcome import Outcome
from trainer.signals import StopRequest


def start(
    cfg: RunConfig,
    d: Dist,
    sink: Sink,
    stop: StopRequest,
    label: str | None = None,
    reserved: float = 0.0,
) -> Loop:
    """Assemble the run, print its banner and warnings, and return its loop. `label` names the
    run in --compare (records carry it; the loop keeps the loss curve); `reserved`: bytes the
    other side of --compare still needs (machine.check_memory)."""
    run = assemble(cfg, d, reserved)
    for line in banner.lines(run):
        sink.say(line)
    for line in banner.warnings(run):
        sink.warn(line)
    return Loop(run, sink, stop, label, keep_curve=label is not None)


def train(cfg: RunConfig, d: Dist, sink: Sink, stop: StopRequest) -> Outcome:
    loop = start(cfg, d, sink, stop)
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
