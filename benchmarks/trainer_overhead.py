"""The trainer's per-step cost against a bare PyTorch loop on the same model and data (CPU).

Both sides get the model, batches and optimizer that `trainer.assemble` builds for a preset;
the bare loop then does only forward, backward, clip and optimizer step, while the trainer adds
everything it promises (NaN and spike checks on the step values read at log steps, health
windows, log records, FP8 statistics on log steps, the learning-rate schedule), logging every 10
steps as any run of 100 steps or more does. `host reads` is the trainer side's blocking
device-to-host reads on a non-log step / a log step (host_reads.py, counted on one untimed run
of 20 steps; a GPU waits for its queue at each): the target is 0 on a non-log step.

Time is the CPU time of the main thread with torch on one thread, so other processes on the
machine (there usually are some) do not land in the numbers the way they do in wall time.
Each round times both sides back to back, alternating which goes first; the overhead is the
median over rounds of the paired ratio (pairs cancel slow drifts of the machine), with the
spread of the rounds beside it. Target: overhead at most 5 %.

    .venv/bin/python benchmarks/trainer_overhead.py [--steps 40] [--rounds 6]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time

import torch
from host_reads import counting, per_kind

from trainer import config
from trainer.assemble import Run, assemble
from trainer.distributed import Dist
from trainer.loop import Loop
from trainer.metrics import Sink
from trainer.signals import StopRequest

LOG_INTERVAL = 10  # the default of any run of 100 steps or more
CASES = (("tiny", "bf16"), ("tiny", "fp8-fwd"), ("small", "bf16"), ("small", "fp8-fwd"))


def _run(model: str, preset: str, steps: int) -> Run:
    cfg = config.build(
        {
            "model": {"size": model},
            "train": {"steps": steps, "eval_interval": 0, "device": "cpu", "batch_size": 8},
            "metrics": {"log_interval": LOG_INTERVAL},
        },
        preset=preset,
    )
    return assemble(
        cfg, Dist(rank=0, world=1, local_rank=0, device=torch.device("cpu"), mode="none")
    )


def trainer_seconds(model: str, preset: str, steps: int) -> float:
    """CPU seconds per step of the trainer's loop."""
    gc.collect()  # the previous run's garbage would otherwise slow whichever side runs next
    loop = Loop(_run(model, preset, steps), Sink(None, enabled=False), StopRequest())
    start = time.thread_time()
    loop.train()
    return (time.thread_time() - start) / steps


def host_reads(model: str, preset: str) -> str:
    """The most blocking reads of a non-log and of a log step, as `non-log / log`."""
    steps = 2 * LOG_INTERVAL
    loop = Loop(_run(model, preset, steps), Sink(None, enabled=False), StopRequest())
    with counting() as reads:
        loop.train()
    non_log, log = per_kind(reads, steps, LOG_INTERVAL)
    return f"{non_log} / {log}"


def bare_seconds(model: str, preset: str, steps: int) -> float:
    """CPU seconds per step of forward, backward, clip and optimizer step, nothing else."""
    gc.collect()
    run = _run(model, preset, steps)
    params = [p for p in run.core.parameters() if p.requires_grad]
    start = time.thread_time()
    for step in range(1, steps + 1):
        x, y = run.batches.train(step, 0)
        with run.weight_context():  # fp32 masters: the FP8 layers' bf16 copies
            with run.forward_context():
                loss = run.core(x, y)
            loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
        run.optimizer.step()
        run.optimizer.zero_grad(set_to_none=True)
    return (time.thread_time() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--models", default="tiny,small", help="comma-separated sizes to time ('' for none)"
    )
    parser.add_argument(
        "--masters-steps",
        type=int,
        default=300,
        help="steps of the bf16-master vs fp32-master comparison (0 skips it)",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, 1 thread, {args.steps} steps, {args.rounds} rounds")
    load = os.getloadavg()[0]
    print(f"load average at start {load:.1f} on {os.cpu_count()} CPUs")
    print(
        f"{'model':<7}{'preset':<9}{'bare ms/step':>14}{'trainer ms/step':>17}"
        f"{'overhead':>10}{'rounds range':>20}{'host reads':>12}"
    )
    models = {m for m in args.models.split(",") if m}
    for model, preset in (c for c in CASES if c[0] in models):
        bare, ours = [], []
        for i in range(args.rounds):
            if i % 2:
                ours.append(trainer_seconds(model, preset, args.steps))
                bare.append(bare_seconds(model, preset, args.steps))
            else:
                bare.append(bare_seconds(model, preset, args.steps))
                ours.append(trainer_seconds(model, preset, args.steps))
        ratios = sorted(t / b - 1 for b, t in zip(bare, ours, strict=True))
        b, t = statistics.median(bare) * 1e3, statistics.median(ours) * 1e3
        spread = f"{ratios[0]:+.1%} .. {ratios[-1]:+.1%}"
        print(
            f"{model:<7}{preset:<9}{b:>14.2f}{t:>17.2f}"
            f"{statistics.median(ratios):>+10.1%}{spread:>20}{host_reads(model, preset):>12}"
        )
    if args.masters_steps:
        masters(args.masters_steps)


MASTERS = (("fp32", False), ("bf16", False), ("bf16", True))


def masters(steps: int) -> None:
    """The bf16 preset's final loss (mean of the last 10 %) with each master-weight storage:
    what bf16 masters lose to rounding, and what stochastic rounding wins back."""
    print(f"\nbf16 preset, tiny model, {steps} steps (lr 3e-3 peak, cosine to 3e-4): final loss")
    print(f"{'master weights':<22}{'final loss':>12}{'unchanged at end':>18}")
    for master, sr in MASTERS:
        cfg = config.build(
            {
                "model": {"size": "tiny"},
                "train": {"steps": steps, "eval_interval": 0, "device": "cpu"},
                "precision": {"master_weights": master, "stochastic_rounding": sr},
                "metrics": {"log_interval": steps // 10},
            },
            preset="bf16",
        )
        run = assemble(
            cfg, Dist(rank=0, world=1, local_rank=0, device=torch.device("cpu"), mode="none")
        )
        loop = Loop(run, _Quiet(), StopRequest(), label="masters", keep_curve=True)
        outcome = loop.train()
        tail = [outcome.losses[s] for s in sorted(outcome.losses)][-max(1, steps // 10) :]
        name = master + (" + stochastic rnd" if sr else "")
        print(f"{name:<22}{sum(tail) / len(tail):>12.4f}{loop.last_unchanged or 0:>18.1%}")


class _Quiet(Sink):
    def __init__(self) -> None:
        super().__init__(None, enabled=False)


if __name__ == "__main__":
    main()
