"""The FP8 quality gate's verdict: is a candidate's run as close to the reference's as the
reference is to itself? Pure: traces in, band and verdict out (the runs: trainer/gate_run.py).

The band is learnt from the reference preset trained with several seeds (each seed changes the
init and the batch order; the data source, the steps and so the tokens are the same): at every
step s, the reference values' mean m and sample standard deviation sd (over the seeds), and

    half width h = max(K * sd, FLOOR * |m|)

K = 3 run-to-run standard deviations; the floor (1 % of the mean for the loss, 10 % for the
grad norm) keeps a step where the seeds happen to agree (the first steps: every seed starts
near ln(vocab)) from being infinitely strict. A candidate value outside [m - h, m + h], either
way, is an outlier: a trace unlike the reference's is flagged whether it is better or worse.

The candidate fails when more than MAX_OUTSIDE (20 %) of the compared steps of its loss trace, or
of its grad-norm trace, are outliers, or when its final loss (the mean of the last 10 % of the
steps, at least one) lies outside the same band over the reference seeds' final losses, or
when it stopped (NaN/Inf: nothing to compare from there on). With 3 seeds, a run of the
reference's own distribution lands outside mean +- 3 sd on about one step in eight (Student's
t, 2 degrees of freedom), hence a fraction and not "any step".
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Final

K: Final = 3.0
FLOORS: Final = {"loss": 0.01, "grad_norm": 0.10}  # relative to the reference mean
MAX_OUTSIDE: Final = 0.2
MIN_SEEDS: Final = 3
FINAL_FRACTION: Final = 0.1


@dataclass(frozen=True)
class Trace:
    """One run's per-step values of one quantity (loss or grad norm)."""

    values: dict[int, float]


@dataclass(frozen=True)
class Rule:
    k: float = K
    max_outside: float = MAX_OUTSIDE

    def __post_init__(self) -> None:
        if not (math.isfinite(self.k) and self.k > 0):
            raise ValueError(f"k must be a positive number, got {self.k}")
        if not 0.0 <= self.max_outside < 1.0:
            raise ValueError(f"max_outside must lie in [0, 1), got {self.max_outside}")


def _half(values: list[float], rule: Rule, floor: float) -> tuple[float, float, float]:
    """(mean, sd, half width) of the reference values at one point."""
    mean = statistics.fmean(values)
    sd = statistics.stdev(values)
    return mean, sd, max(rule.k * sd, floor * abs(mean))


def band_check(
    name: str, reference: list[dict[int, float]], candidate: dict[int, float], rule: Rule
) -> dict[str, Any]:
    """The band over the steps every reference run and the candidate have, and which of the
    candidate's values fall outside it."""
    steps = sorted(set.intersection(*(set(r) for r in reference), set(candidate)))
    rows = [_half([r[s] for r in reference], rule, FLOORS[name]) for s in steps]
    values = [candidate[s] for s in steps]
    outside = [
        s
        for s, v, (m, _, h) in zip(steps, values, rows, strict=True)
        if not (math.isfinite(v) and abs(v - m) <= h)
    ]
    frac = len(outside) / len(steps) if steps else 1.0
    return {
        "steps": steps,
        "mean": [m for m, _, _ in rows],
        "std": [sd for _, sd, _ in rows],
        "reference": [[r[s] for s in steps] for r in reference],  # per seed
        "lo": [m - h for m, _, h in rows],
        "hi": [m + h for m, _, h in rows],
        "candidate": values,
        "outside_steps": outside,
        "outside_frac": frac,
        "floor_rel": FLOORS[name],
        "pass": bool(steps) and frac <= rule.max_outside,
    }


def _final(values: dict[int, float], steps: list[int]) -> float:
    return statistics.fmean(values[s] for s in steps)


def final_check(
    reference: list[dict[int, float]], candidate: dict[int, float], steps: list[int], rule: Rule
) -> dict[str, Any]:
    """The final-loss window (the last 10 % of the compared steps) against the reference seeds'
    own final losses, with the same band rule."""
    window = steps[-max(1, int(len(steps) * FINAL_FRACTION)) :] if steps else []
    if not window:
        return {
            "window_steps": [],
            "candidate": None,
            "mean": None,
            "lo": None,
            "hi": None,
            "pass": False,
        }
    finals = [_final(r, window) for r in reference]
    mean, sd, h = _half(finals, rule, FLOORS["loss"])
    value = _final(candidate, window)
    return {
        "window_steps": window,
        "reference": finals,
        "candidate": value,
        "mean": mean,
        "std": sd,
        "lo": mean - h,
        "hi": mean + h,
        "pass": math.isfinite(value) and abs(value - mean) <= h,
    }


def verdict(
    losses: list[dict[int, float]],
    grad_norms: list[dict[int, float]],
    candidate_loss: dict[int, float],
    candidate_norm: dict[int, float],
    stopped: str | None,
    rule: Rule,
) -> dict[str, Any]:
    """The checks and the verdict with the reasons it failed (`stopped`: why the candidate
    ended early, or None)."""
    if len(losses) < MIN_SEEDS:
        raise ValueError(f"the band needs >= {MIN_SEEDS} reference runs, got {len(losses)}")
    loss = band_check("loss", losses, candidate_loss, rule)
    norm = band_check("grad_norm", grad_norms, candidate_norm, rule)
    final = final_check(losses, candidate_loss, loss["steps"], rule)
    why: list[str] = []
    if stopped is not None:
        why.append(f"the candidate stopped: {stopped}")
    for label, check in (("loss", loss), ("grad norm", norm)):
        if not check["pass"]:
            why.append(
                f"{label}: {len(check['outside_steps'])} of {len(check['steps'])} steps "
                f"({check['outside_frac']:.0%}) outside the band, more than {rule.max_outside:.0%}"
            )
    if not final["pass"] and final["candidate"] is not None:
        why.append(
            f"final loss {final['candidate']:.4f} outside [{final['lo']:.4f}, {final['hi']:.4f}] "
            f"(mean of steps {final['window_steps'][0]}-{final['window_steps'][-1]})"
        )
    return {
        "verdict": "fail" if why else "pass",
        "why": why,
        "rule": {
            "k": rule.k,
            "floor_rel": dict(FLOORS),
            "max_outside": rule.max_outside,
            "final_fraction": FINAL_FRACTION,
            "min_seeds": MIN_SEEDS,
        },
        "loss": loss,
        "grad_norm": norm,
        "final_loss": final,
    }
