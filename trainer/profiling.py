"""--profile: a torch.profiler trace of a few steps, one Chrome/Perfetto file per rank."""

from __future__ import annotations

import torch

from trainer import checkpoint
from trainer.assemble import Run
from trainer.metrics import Sink


def start(run: Run, sink: Sink) -> torch.profiler.profile | None:
    """--profile N: torch.profiler over steps 3..N+2 (two warm-up steps first), written as a
    Chrome/Perfetto trace (chrome://tracing, ui.perfetto.dev) per rank; None without --profile.
    The loop calls .step() after each step and .stop() at the end."""
    n = run.cfg.metrics.profile_steps
    if not n:
        return None
    where = run.cfg.metrics.profile_dir or (str(run.ckpt_dir) if run.ckpt_dir else ".")
    out = checkpoint.prepare_dir(where) / f"profile_rank{run.dist.rank}.json"
    activities = [torch.profiler.ProfilerActivity.CPU]
    if run.dist.device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)

    def ready(prof: torch.profiler.profile) -> None:
        prof.export_chrome_trace(str(out))
        sink.say(f"profile: {n} step(s) traced into {out}")

    profiler = torch.profiler.profile(
        activities=activities,
        schedule=torch.profiler.schedule(wait=1, warmup=1, active=n, repeat=1),
        on_trace_ready=ready,
        record_shapes=True,
    )
    profiler.start()
    return profiler
