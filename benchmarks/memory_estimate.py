"""The memory estimate against what the CPU allocator actually held, per configuration.

trainer/memory.py estimates a step's peak before the model exists (the memory check refuses a
configuration that cannot fit). Here each configuration trains a few steps in this process
(logging every step, so the optimizer's unchanged-update count runs each time) under
torch.profiler with `profile_memory=True`: the CPU allocator reports every allocation and free,
and the peak of its running total, from before the model is built to the end, is what the
estimate is held to. Prints a table; target: every row within 15 % (the module doc of
trainer/memory.py says what is modelled). CPU only (CUDA's allocator adds its own caching).

    benchmarks/memory_estimate.py                       # the table in docs/trainer.md
    benchmarks/memory_estimate.py --rows tiny:fp8:8:64:none --steps 2
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from trainer import config, distributed  # noqa: E402 - after making the repo importable
from trainer.memory import Estimate  # noqa: E402
from trainer.metrics import Sink  # noqa: E402
from trainer.run import start  # noqa: E402
from trainer.signals import StopRequest  # noqa: E402

TARGET = 0.15
# size:preset:batch:seq:recompute[:grad_accum[:master]]
ROWS = (
    "tiny:bf16:8:64:none",
    "tiny:fp8:8:64:none",
    "small:bf16:8:256:none",
    "small:fp8-fwd:8:256:none",
    "small:fp8:16:256:selective",
    "small:fp8-fwd:4:256:full",
    "small:bf16:8:256:none:2",
    "small:bf16:8:256:none:1:bf16",
    "125m:bf16:2:512:none",
    "125m:fp8:2:512:none",
    "125m:fp8-fwd:2:512:full",
)


def _peak_bytes(prof: torch.profiler.profile) -> int:
    """The peak of the CPU allocator's running total while profiling, from the trace's
    [memory] events (each carries the allocator's total after it)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text())["traceEvents"]
    memory = [e["args"] for e in events if e.get("name") == "[memory]"]
    if not memory:
        return 0
    before = int(memory[0]["Total Allocated"]) - int(memory[0]["Bytes"])
    return max(int(m["Total Allocated"]) for m in memory) - before


def measure(row: str, steps: int) -> tuple[int, Estimate]:
    size, preset, batch, seq, recompute, *rest = row.split(":")
    accum = int(rest[0]) if rest else 1
    master = rest[1] if len(rest) > 1 else None
    overrides: dict[str, dict[str, object]] = {
        "model": {"size": size},
        "data": {"seq_len": int(seq)},
        "train": {
            "steps": steps,
            "batch_size": int(batch),
            "grad_accum": accum,
            "eval_interval": 0,
            "activation_checkpointing": recompute,
            "device": "cpu",
        },
        "metrics": {"log_interval": 1},
    }
    if master:
        overrides["precision"] = {"master_weights": master}
    cfg = config.build(overrides=overrides, preset=preset)
    dist = distributed.init(cfg.train)
    activities = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=activities, profile_memory=True) as prof:
        loop = start(cfg, dist, Sink(None, enabled=False), StopRequest())
        loop.train()
    return _peak_bytes(prof), loop.run.mem_estimate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default=",".join(ROWS), help="size:preset:batch:seq:recompute")
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {args.steps} steps per row, target within {TARGET:.0%}")
    print(f"{'configuration':<32}{'measured MiB':>14}{'estimate MiB':>14}{'estimate/measured':>19}")
    worst = 0.0
    for row in args.rows.split(","):
        started = time.perf_counter()
        peak, estimate = measure(row, args.steps)
        ratio = estimate.total / peak if peak else float("nan")
        worst = max(worst, abs(ratio - 1.0))
        print(
            f"{row:<32}{peak / 2**20:>14.1f}{estimate.total / 2**20:>14.1f}{ratio:>18.1%} "
            f" ({time.perf_counter() - started:.0f} s)",
            flush=True,
        )
    verdict = "within" if worst <= TARGET else "OUTSIDE"
    print(f"worst deviation {worst:.1%}: {verdict} the {TARGET:.0%} target")
    return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
