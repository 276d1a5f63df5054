"""Monitoring: console lines and a JSONL file, one record per log interval.

Records carry loss, tokens/s per device, step time, peak memory, MFU, the grad-norm median and
p99 over a window and FP8 amax/scale statistics; evaluation and a final summary get their own
records (`event`: train, eval, summary). Only rank 0 writes. Non-finite numbers are written as
null: JSON has no NaN.
"""

from __future__ import annotations

import contextlib
import json
import math
import resource
import sys
from collections import deque
from pathlib import Path
from typing import IO, Any

import torch

from trainer.errors import BadInput


class Window:
    """The last `size` values; median and p99 by nearest rank."""

    def __init__(self, size: int) -> None:
        self.values: deque[float] = deque(maxlen=size)

    def add(self, value: float) -> None:
        if math.isfinite(value):
            self.values.append(value)

    def quantile(self, q: float) -> float | None:
        if not self.values:
            return None
        ordered = sorted(self.values)
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def peak_memory_gb(device: torch.device) -> tuple[float, str]:
    """Peak allocated GPU memory, or the process's peak RSS on a CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 1e9, "cuda_max_allocated"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, "host_max_rss"


def json_safe(value: Any) -> Any:
    """JSON has no NaN: non-finite numbers become null (a stopped run's last loss); the
    metrics lines, --compare's and the gate's JSON all write through it."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def _board(logdir: str) -> Any:
    """A TensorBoard SummaryWriter (torch.utils.tensorboard needs the tensorboard package)."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as exc:
        raise BadInput(
            f"metrics.tensorboard_dir {logdir}: TensorBoard output needs the tensorboard package "
            f"({exc}); pip install tensorboard, or drop --tensorboard-dir"
        ) from exc
    try:
        return SummaryWriter(log_dir=logdir)
    except OSError as exc:
        raise BadInput(f"metrics.tensorboard_dir {logdir}: cannot write ({exc})") from exc


def _to_board(board: Any, record: dict[str, Any]) -> None:
    """Numeric fields of train/eval records as scalars `event/field` at the record's step."""
    if record.get("event") not in ("train", "eval"):
        return
    prefix = record["event"] if "run" not in record else f"{record['run']}/{record['event']}"
    for key, value in record.items():
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if key != "step" and number and math.isfinite(value):
            board.add_scalar(f"{prefix}/{key}", value, record["step"])


class Sink:
    """Where records go: the JSONL file (append, flushed per line) and the console."""

    def __init__(
        self,
        path: str | None,
        *,
        enabled: bool,
        console: IO[str] | None = None,
        tensorboard: str | None = None,
    ) -> None:
        self.enabled = enabled
        self._board = _board(tensorboard) if tensorboard and enabled else None
        self.console = console if console is not None else sys.stdout
        self._file: IO[str] | None = None
        self._path = path
        if path and enabled:
            try:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives with the run
            except OSError as exc:
                raise BadInput(
                    f"metrics file {path}: cannot open it ({exc.strerror or exc})"
                ) from exc

    def record(self, record: dict[str, Any]) -> None:
        if self._board is not None:
            _to_board(self._board, record)
        if self._file is None:
            return
        try:
            self._file.write(json.dumps(json_safe(record), allow_nan=False) + "\n")
            self._file.flush()
        except OSError as exc:
            self._drop()
            raise BadInput(
                f"metrics file {self._path}: cannot write to it ({exc.strerror or exc}); free "
                "space there or pass another --metrics-file"
            ) from exc

    def _drop(self) -> None:
        """Forget a file that failed (closing it may fail again on the buffered bytes)."""
        f, self._file = self._file, None
        if f is not None:
            with contextlib.suppress(OSError):
                f.close()

    def say(self, line: str) -> None:
        if self.enabled:
            print(line, file=self.console, flush=True)

    def warn(self, line: str) -> None:
        if self.enabled:
            print(f"warning: {line}", file=sys.stderr, flush=True)

    def close(self) -> None:
        self._drop()
        if self._board is not None:
            self._board.close()
            self._board = None


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def train_line(r: dict[str, Any]) -> str:
    """One human-readable console line for a train record."""
    parts = [
        f"step {r['step']}/{r['steps']}",
        f"loss {_fmt(r['loss'], '.4f')}",
        f"lr {r['lr']:.2e}",
        f"gnorm {_fmt(r['grad_norm'], '.3f')} (p50 {_fmt(r['grad_norm_median'], '.3f')} "
        f"p99 {_fmt(r['grad_norm_p99'], '.3f')})",
        f"{r['tokens_per_s']:,.0f} tok/s/dev",
        f"{r['step_time_s'] * 1000:.1f} ms/step",
        f"mem {r['peak_mem_gb']:.2f} GB",
    ]
    if r.get("mfu") is not None:
        parts.append(f"mfu {r['mfu']:.1%}")
    if r.get("fp8_input_scale_median") is not None:
        parts.append(f"fp8 scale {r['fp8_input_scale_min']:.3g}..{r['fp8_input_scale_max']:.3g}")
    if r.get("loss_scale") is not None:
        parts.append(f"loss scale {r['loss_scale']:.0f}")
    return " | ".join(parts)
