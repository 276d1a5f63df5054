"""A/B comparison: an FP8 run's loss curve against the BF16 baseline from the same start.

Both sides train from the same seed, so they start from the same weights (initialised in fp32,
then cast) and see the same batches; only the precision preset differs (how they are trained:
trainer/compare_run.py). The summary gives the throughput ratio B/A, the loss-curve difference
over the steps both trained and, for a side that stopped, the step and the reason; it is
written as JSON next to a PNG (trainer/figure.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer import figure
from trainer.metrics import json_safe
from trainer.mfu import mfu
from trainer.outcome import Outcome


@dataclass(frozen=True)
class Side:
    name: str
    losses: dict[int, float]
    tokens_per_s: float | None
    peak_mem_gb: float
    mfu: float | None
    status: str
    stopped_at: int | None = None  # the step a numerical stop (or a signal) ended this side in
    reason: str | None = None
    fp8: bool = False  # trained any layer in FP8 (the CPU emulates those GEMMs)

    @classmethod
    def from_outcome(
        cls,
        name: str,
        outcome: Outcome,
        tokens_per_step: int,
        peak_tflops: float | None,
        flops_per_token: float,
        stopped_at: int | None = None,
        *,
        fp8: bool = False,
    ) -> Side:
        tps = outcome.tokens_per_s(tokens_per_step)
        return cls(
            name=name,
            losses=dict(outcome.losses),
            tokens_per_s=tps,
            peak_mem_gb=outcome.peak_mem_gb,
            mfu=mfu(flops_per_token, tps, peak_tflops) if tps and peak_tflops else None,
            status=outcome.status,
            stopped_at=stopped_at,
            reason=outcome.message if stopped_at is not None else None,
            fp8=fp8,
        )

    def stop_line(self) -> str | None:
        """`fp8 stopped at step 7: loss is nan and grad norm is nan`: the figure's label."""
        if self.stopped_at is None:
            return None
        reason = re.sub(r"^step \d+: ", "", self.reason or self.status).split(";")[0]
        return f"{self.name} stopped at step {self.stopped_at}: {reason}"


def _mean_tail(values: list[float], tail: int) -> float | None:
    """Mean of the last `tail` values (one step's loss is noisy)."""
    return sum(values[-tail:]) / len(values[-tail:]) if values else None


CPU_NOTE = (
    "throughput measured on a CPU: meaningless for FP8 (the CPU emulates FP8 GEMMs); "
    "measure speed on an FP8 GPU"
)
CPU_NOTE_NO_FP8 = (
    "throughput measured on a CPU: it says little of a GPU's (other kernels, other bounds); "
    "measure speed on the GPU"
)


def summarize(
    a: Side, b: Side, device: str, interleaved_every: int, compiled: bool
) -> dict[str, Any]:
    """The comparison over the steps both sides trained; each side's status and stop."""
    steps = sorted(set(a.losses) & set(b.losses))
    diffs = [b.losses[s] - a.losses[s] for s in steps]
    tail = max(1, len(steps) // 10)
    final_a = _mean_tail([a.losses[s] for s in steps], tail)
    final_b = _mean_tail([b.losses[s] for s in steps], tail)
    ratio = b.tokens_per_s / a.tokens_per_s if a.tokens_per_s and b.tokens_per_s else None
    return {
        "a": a.name,
        "b": b.name,
        "steps": len(steps),
        "throughput_ratio": ratio,
        "measured_on": device,
        "throughput_note": None
        if device != "cpu"
        else CPU_NOTE
        if a.fp8 or b.fp8
        else CPU_NOTE_NO_FP8,
        "interleaved_every": interleaved_every,
        "compiled": compiled,
        "stopped": [
            {
                "side": side.name,
                "step": side.stopped_at,
                "status": side.status,
                "reason": side.reason,
            }
            for side in (a, b)
            if side.stopped_at is not None
        ],
        "loss_diff": {
            "mean_abs": sum(abs(x) for x in diffs) / len(diffs),
            "max_abs": max(abs(x) for x in diffs),
            "final_tail_steps": tail,
            "final_a": final_a,
            "final_b": final_b,
            "final_rel": (final_b - final_a) / final_a if final_a and final_b is not None else None,
        }
        if diffs
        else None,
        "runs": {
            side.name: {
                "tokens_per_s": side.tokens_per_s,
                "peak_mem_gb": side.peak_mem_gb,
                "mfu": side.mfu,
                "status": side.status,
                "stopped_at": side.stopped_at,
                "losses": [side.losses[s] for s in sorted(side.losses)],
                "loss_steps": sorted(side.losses),
            }
            for side in (a, b)
        },
    }


def figure_of(summary: dict[str, Any], a: Side, b: Side) -> figure.AbFigure:
    """What the PNG shows, whichever renderer draws it."""
    stops = [
        figure.Stop(side.stopped_at, line)
        for side in (a, b)
        if side.stopped_at is not None and (line := side.stop_line()) is not None
    ]
    return figure.AbFigure(
        a=a.name,
        b=b.name,
        loss_a=sorted(a.losses.items()),
        loss_b=sorted(b.losses.items()),
        ratio=summary["throughput_ratio"],
        stops=stops,
        note=summary["throughput_note"],
    )


def write(summary: dict[str, Any], a: Side, b: Side, out_dir: Path) -> tuple[Path, Path]:
    """The JSON and the PNG, each written beside and renamed into place."""
    stem = f"compare_{a.name}_vs_{b.name}"
    json_path, png_path = out_dir / f"{stem}.json", out_dir / f"{stem}.png"
    tmp_png = png_path.with_name(f".{stem}.tmp.png")  # the suffix tells matplotlib the format
    renderer = figure.write_png(tmp_png, figure_of(summary, a, b))
    tmp_png.replace(png_path)
    doc = summary | {"png": str(png_path), "png_renderer": renderer}
    tmp_json = json_path.with_name(f".{json_path.name}.tmp")
    tmp_json.write_text(json.dumps(json_safe(doc), indent=1, allow_nan=False) + "\n")
    tmp_json.replace(json_path)
    return json_path, png_path


def report(summary: dict[str, Any]) -> list[str]:
    d, a, b = summary["loss_diff"], summary["a"], summary["b"]
    ratio = summary["throughput_ratio"]
    note = f" ({summary['throughput_note']})" if summary.get("throughput_note") else ""
    lines = [
        f"compare {b} vs {a}: throughput x{ratio:.3f}{note}" if ratio else f"compare {b} vs {a}",
    ]
    if d is not None and d["final_rel"] is not None:
        lines.append(
            f"  final loss {a} {d['final_a']:.4f}, {b} {d['final_b']:.4f} "
            f"({d['final_rel']:+.2%}); per-step |diff| mean {d['mean_abs']:.4f}, "
            f"max {d['max_abs']:.4f}"
        )
    for stop in summary["stopped"]:
        lines.append(f"  {stop['side']} stopped at step {stop['step']}: {stop['status']}")
    return lines
