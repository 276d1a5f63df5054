"""FP8 amax/scale statistics: the distribution of each FP8 layer's scale factors.

On a log step the monitor hooks the FP8 layers for one micro-batch and records, per layer, the
amax of the input and the weight (and of the output gradient when gradients are FP8) and the
scale a dynamic tensorwise cast uses (fp8_max / amax). It also measures the fraction of
non-zero inputs that flush to zero in the FP8 cast: dynamic scaling maps amax exactly onto the
format's maximum, so overflow shows up as non-finite amax, and a too-wide value distribution
shows up as underflow at the small end. Either one is a warning: the scales show trouble
before the loss explodes.

Hooks do not run inside torch.compile'd blocks (Dynamo skips hooks added after compiling), so
the loop runs the monitored micro-batch eagerly (train_step.py). A layer that did not run is
"not measured" (-1 in the table, null in the record), never a NaN that would read as overflow;
a NaN amax (overflow) becomes +inf before the all-reduce, so one rank's overflow is not hidden
by another rank's finite value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from trainer.fp8.rules import FP8_MAX

UNDERFLOW_WARN: Final = 0.01  # more than 1 % of non-zero inputs flushed to zero
_AMAX_FLOOR: Final = 1e-12  # torchao clamps amax here before computing the scale
_SAMPLE: Final = 1 << 13  # values checked for underflow per tensor (±0.1 % at a 1 % rate)
# Per layer: input amax, weight amax, input underflow fraction, grad-output amax, grad underflow.
_FIELDS: Final = 5
NOT_MEASURED: Final = -1.0  # every measured value is >= 0, or NaN/inf


def _local(t: torch.Tensor) -> torch.Tensor:
    """The local shard of a DTensor (FSDP2), or the tensor itself."""
    to_local = getattr(t, "to_local", None)
    return to_local() if callable(to_local) else t


def _amax(t: torch.Tensor) -> torch.Tensor:
    """max |t| as fp32 from one min/max reduction: no |t| temporary (and on CPUs far cheaper
    than vector_norm(ord=inf), which has no fast bf16 path)."""
    lo, hi = torch.aminmax(t.detach())
    return torch.maximum(-lo, hi).float()


def _underflow(x: torch.Tensor, amax: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Fraction of non-zero values the scaled cast flushes to zero, on an evenly strided
    sample (a fraction needs no more, and the full tensor would cost a step's worth)."""
    flat = x.detach().reshape(-1)
    if flat.numel() > _SAMPLE:
        flat = flat[:: flat.numel() // _SAMPLE]
    xf = flat.float()
    nonzero = xf != 0
    scale = FP8_MAX[dtype] / amax.clamp(min=_AMAX_FLOOR)
    flushed = ((xf * scale).to(dtype).float() == 0) & nonzero
    return flushed.sum() / nonzero.sum().clamp(min=1)


@dataclass(frozen=True)
class LayerStats:
    name: str
    input_amax: float
    weight_amax: float
    input_scale: float
    weight_scale: float
    input_underflow: float
    grad_amax: float | None
    grad_underflow: float | None


class Fp8Monitor:
    """Collects per-layer FP8 statistics on the micro-batches it is armed for."""

    def __init__(
        self,
        model: nn.Module,
        layer_names: list[str],
        forward_dtype: torch.dtype,
        backward_dtype: torch.dtype | None,
    ) -> None:
        modules = dict(model.named_modules())
        self.layers = [(name, modules[name]) for name in layer_names]
        self.forward_dtype = forward_dtype
        self.backward_dtype = backward_dtype
        self._handles: list[RemovableHandle] = []
        self._rows: dict[str, torch.Tensor] = {}

    def arm(self) -> None:
        """Hook the layers for the next forward (and its backward)."""
        self._rows = {}
        for name, module in self.layers:
            self._handles.append(module.register_forward_hook(self._forward_hook(name)))

    def disarm(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _row(self, name: str, like: torch.Tensor) -> torch.Tensor:
        if name not in self._rows:
            self._rows[name] = torch.full((_FIELDS,), NOT_MEASURED, device=like.device)
        return self._rows[name]

    def _forward_hook(self, name: str) -> Callable[[nn.Module, Any, Any], None]:
        def hook(module: nn.Module, inputs: Any, output: Any) -> None:
            with torch.no_grad():
                x = inputs[0]
                amax = _amax(x)
                # the parameter, or its compute copy (torchao_backend.compute_weights)
                weight = _local(module.__dict__["_parameters"]["weight"])
                # under FSDP2 float8 all-gather the unsharded weight is already FP8
                restore = getattr(weight, "to_original_precision", None)
                if callable(restore):
                    weight = restore()
                row = self._row(name, x)
                row[0] = amax
                row[1] = _amax(weight) if weight.numel() else 0.0
                row[2] = _underflow(x, amax, self.forward_dtype)
            wants_grad = self.backward_dtype is not None and isinstance(output, torch.Tensor)
            if wants_grad and torch.is_grad_enabled() and output.requires_grad:
                output.register_hook(self._grad_hook(name))

        return hook

    def _grad_hook(self, name: str) -> Callable[[torch.Tensor], None]:
        def hook(grad: torch.Tensor) -> None:
            assert self.backward_dtype is not None
            with torch.no_grad():
                amax = _amax(grad)
                row = self._row(name, grad)
                row[3] = amax
                row[4] = _underflow(grad, amax, self.backward_dtype)

        return hook

    def table(self, device: torch.device) -> torch.Tensor:
        """(layers, fields) on `device`, ready for an all-reduce MAX across ranks: NOT_MEASURED
        where a layer did not run, +inf where an amax was NaN (NaN would lose the max)."""
        empty = torch.full((_FIELDS,), NOT_MEASURED, device=device)
        rows = [self._rows.get(name, empty).to(device) for name, _ in self.layers]
        return torch.nan_to_num(torch.stack(rows), nan=float("inf"), posinf=float("inf"))

    def summarize(self, table: torch.Tensor) -> tuple[dict[str, Any], list[str]]:
        """Metrics fields and warnings from a (possibly all-reduced) table."""
        fmax_fwd = FP8_MAX[self.forward_dtype]
        stats = []
        for (name, _), row in zip(self.layers, table.tolist(), strict=True):
            in_amax, w_amax, in_uf, g_amax, g_uf = (_measured(v) for v in row)
            if in_amax is None or w_amax is None or in_uf is None:
                continue  # the layer did not run on any rank
            stats.append(
                LayerStats(
                    name=name,
                    input_amax=in_amax,
                    weight_amax=w_amax,
                    input_scale=fmax_fwd / max(in_amax, _AMAX_FLOOR),
                    weight_scale=fmax_fwd / max(w_amax, _AMAX_FLOOR),
                    input_underflow=in_uf,
                    grad_amax=g_amax,
                    grad_underflow=g_uf,
                )
            )
        return _fields(stats, len(self.layers)), _warnings(stats)


def _measured(value: float) -> float | None:
    return None if value == NOT_MEASURED else value


def _fields(stats: list[LayerStats], layers: int) -> dict[str, Any]:
    """The record's fp8_* fields: null when no layer was measured (never NaN)."""
    out: dict[str, Any] = {"fp8_layers": layers, "fp8_layers_measured": len(stats)}
    if not stats:
        return out | dict.fromkeys(_STAT_FIELDS)
    scales = sorted(s.input_scale for s in stats)
    out |= {
        "fp8_input_amax_max": max(s.input_amax for s in stats),
        "fp8_weight_amax_max": max(s.weight_amax for s in stats),
        "fp8_input_scale_min": scales[0],
        "fp8_input_scale_median": scales[len(scales) // 2],
        "fp8_input_scale_max": scales[-1],
        "fp8_weight_scale_min": min(s.weight_scale for s in stats),
        "fp8_underflow_max": max(s.input_underflow for s in stats),
    }
    grads = [s for s in stats if s.grad_amax is not None]
    if grads:
        out["fp8_grad_amax_max"] = max(s.grad_amax or 0.0 for s in grads)
        out["fp8_grad_underflow_max"] = max(s.grad_underflow or 0.0 for s in grads)
    return out


_STAT_FIELDS: Final = (
    "fp8_input_amax_max",
    "fp8_weight_amax_max",
    "fp8_input_scale_min",
    "fp8_input_scale_median",
    "fp8_input_scale_max",
    "fp8_weight_scale_min",
    "fp8_underflow_max",
)


def _warnings(stats: list[LayerStats]) -> list[str]:
    out = []
    for s in stats:
        for what, amax, flushed in (
            ("input", s.input_amax, s.input_underflow),
            ("weight", s.weight_amax, None),
            ("gradient", s.grad_amax, s.grad_underflow),
        ):
            if amax is None:
                continue
            if not math.isfinite(amax):  # NaN travels as +inf (see Fp8Monitor.table)
                out.append(f"FP8 {s.name}: {what} amax is not finite (overflow before the cast)")
            elif amax < _AMAX_FLOOR:
                out.append(f"FP8 {s.name}: {what} is all zeros (scale at its clamp)")
            elif flushed is not None and flushed > UNDERFLOW_WARN:
                out.append(
                    f"FP8 {s.name}: {flushed:.1%} of {what} values flush to zero (range too wide "
                    "for the format); try fp8_recipe rowwise or add the layer to sensitive_layers"
                )
    return out
