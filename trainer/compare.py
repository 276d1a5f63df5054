"""A/B comparison (seed §4.3: "compare the loss curve against the BF16 baseline first").

Both sides train from the same seed, so they start from the same weights (initialised in fp32,
then cast) and see the same batches; only the precision preset differs. The summary gives the
throughput ratio B/A and the loss-curve difference, and is written as JSON next to a PNG plot.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer import figure
from trainer.mfu import mfu
from trainer.outcome import Outcome
from trainer.plot import Panel, Series, chart


@dataclass(frozen=True)
class Side:
    name: str
    losses: dict[int, float]
    tokens_per_s: float | None
    peak_mem_gb: float
    mfu: float | None
    status: str

    @classmethod
    def from_outcome(
        cls,
        name: str,
        outcome: Outcome,
        tokens_per_step: int,
        peak_tflops: float | None,
        flops_per_token: float,
    ) -> Side:
        tps = outcome.tokens_per_s(tokens_per_step)
        return cls(
            name=name,
            losses=dict(outcome.losses),
            tokens_per_s=tps,
            peak_mem_gb=outcome.peak_mem_gb,
            mfu=mfu(flops_per_token, tps, peak_tflops) if tps and peak_tflops else None,
            status=outcome.status,
        )

    def final_loss(self, tail: int) -> float:
        """Mean of the last `tail` losses (one step's loss is noisy)."""
        values = [self.losses[s] for s in sorted(self.losses)][-tail:]
        return sum(values) / len(values)


CPU_NOTE = (
    "throughput measured on a CPU: meaningless for FP8 (the CPU emulates FP8 GEMMs); "
    "measure speed on an FP8 GPU"
)


def summarize(a: Side, b: Side, device: str) -> dict[str, Any]:
    steps = sorted(set(a.losses) & set(b.losses))
    diffs = [b.losses[s] - a.losses[s] for s in steps]
    tail = max(1, len(steps) // 10)
    final_a, final_b = a.final_loss(tail), b.final_loss(tail)
    ratio = b.tokens_per_s / a.tokens_per_s if a.tokens_per_s and b.tokens_per_s else None
    return {
        "a": a.name,
        "b": b.name,
        "steps": len(steps),
        "throughput_ratio": ratio,
        "measured_on": device,
        "throughput_note": CPU_NOTE if device == "cpu" else None,
        "loss_diff": {
            "mean_abs": sum(abs(x) for x in diffs) / len(diffs),
            "max_abs": max(abs(x) for x in diffs),
            "final_tail_steps": tail,
            "final_a": final_a,
            "final_b": final_b,
            "final_rel": (final_b - final_a) / final_a,
        },
        "runs": {
            side.name: {
                "tokens_per_s": side.tokens_per_s,
                "peak_mem_gb": side.peak_mem_gb,
                "mfu": side.mfu,
                "status": side.status,
                "losses": [side.losses[s] for s in steps],
            }
            for side in (a, b)
        },
    }


def write(summary: dict[str, Any], a: Side, b: Side, out_dir: Path) -> tuple[Path, Path]:
    stem = f"compare_{a.name}_vs_{b.name}"
    json_path, png_path = out_dir / f"{stem}.json", out_dir / f"{stem}.png"
    steps = sorted(set(a.losses) & set(b.losses))
    diff = [(st, b.losses[st] - a.losses[st]) for st in steps]
    if figure.available():
        figure.ab_figure(
            png_path,
            (a.name, a.losses),
            (b.name, b.losses),
            summary["throughput_ratio"],
            summary["throughput_note"],
        )
    else:  # an image without matplotlib: the built-in chart
        _plain_chart(png_path, a, b, diff)
    json_path.write_text(json.dumps(summary | {"png": str(png_path)}, indent=1) + "\n")
    return json_path, png_path


def _plain_chart(png_path: Path, a: Side, b: Side, diff: list[tuple[int, float]]) -> None:
    png_path.write_bytes(
        chart(
            [
                Panel(
                    f"loss per step: {a.name} vs {b.name}",
                    [
                        Series(a.name, sorted(a.losses.items())),
                        Series(b.name, sorted(b.losses.items())),
                    ],
                ),
                Panel(
                    f"loss difference {b.name} - {a.name}", [Series(f"{b.name} - {a.name}", diff)]
                ),
            ]
        )
    )


def report(summary: dict[str, Any]) -> list[str]:
    d, a, b = summary["loss_diff"], summary["a"], summary["b"]
    ratio = summary["throughput_ratio"]
    note = f" ({summary['throughput_note']})" if summary.get("throughput_note") else ""
    return [
        f"compare {b} vs {a}: throughput x{ratio:.3f}{note}" if ratio else f"compare {b} vs {a}",
        f"  final loss {a} {d['final_a']:.4f}, {b} {d['final_b']:.4f} ({d['final_rel']:+.2%}); "
        f"per-step |diff| mean {d['mean_abs']:.4f}, max {d['max_abs']:.4f}",
    ]
