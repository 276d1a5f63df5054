"""Blocking device-to-host reads per training step, counted on a CPU run (issue 35).

On a GPU every `.item()`, `.tolist()`, `.cpu()`, `float(t)`, `int(t)`, `bool(t)` of a device
tensor and every `torch.cuda.synchronize` waits for the device's queue to drain; on a CPU they
cost nothing, so `counting()` counts the calls themselves (torch's Python-level ones included),
each attributed to the step train_step.backward was last called for and to its caller (file,
function). `tests/trainer/test_trainer_host_syncs.py` holds the trainer to 0 on a non-log step
with it, and `trainer_overhead.py` prints the counts beside its timings. On a GPU,
`torch.cuda.set_sync_debug_mode("warn")` gives torch's own view of the same.
"""

from __future__ import annotations

import contextlib
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import torch

from trainer import train_step

READS = ("item", "tolist", "cpu", "__float__", "__int__", "__bool__")
# reads of tensors that live on the host on every device, so no sync: the optimizer's step
# counter (a CPU tensor, as torch's own AdamW keeps it when not capturable)
HOST_SIDE = {("optim.py", "_update")}

Reads = dict[int, list[tuple[str, str]]]


@contextlib.contextmanager
def counting() -> Iterator[Reads]:
    """Within: the reads of each step (step -> [(file, function)]), filled as the run goes."""
    per_step: Reads = defaultdict(list)
    current = [0]
    real_backward = train_step.backward

    def backward(run: Any, params: Any, step: int, lr: float, arm: bool) -> Any:
        current[0] = step
        return real_backward(run, params, step, lr, arm)

    def note() -> None:
        caller = sys._getframe(2).f_code
        where = (caller.co_filename.rsplit("/", 1)[-1], caller.co_name)
        if current[0] and where not in HOST_SIDE:
            per_step[current[0]].append(where)

    def wrap(real: Callable[..., Any]) -> Callable[..., Any]:
        def counted(self: torch.Tensor, *a: Any) -> Any:
            note()
            return real(self, *a)

        return counted

    saved: list[tuple[Any, str, Any]] = [(train_step, "backward", real_backward)]
    saved += [(torch.Tensor, name, getattr(torch.Tensor, name)) for name in READS]
    saved.append((torch.cuda, "synchronize", torch.cuda.synchronize))
    try:
        train_step.backward = backward
        for name in READS:
            setattr(torch.Tensor, name, wrap(getattr(torch.Tensor, name)))
        # counted only: on a machine without a GPU the real call would fail
        torch.cuda.synchronize = lambda *a, **k: note()
        yield per_step
    finally:
        for owner, name, real in saved:
            setattr(owner, name, real)


def per_kind(reads: Reads, steps: int, log_interval: int) -> tuple[int, int]:
    """The most reads of any non-log step and of any log step of a run of `steps`."""
    logged = {s for s in range(1, steps + 1) if s % log_interval == 0 or s == steps}
    non_log = [len(reads.get(s, [])) for s in range(1, steps + 1) if s not in logged]
    log = [len(reads.get(s, [])) for s in logged]
    return max(non_log, default=0), max(log, default=0)
