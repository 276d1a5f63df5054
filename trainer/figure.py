"""The --compare figure, drawn with matplotlib's Agg backend (no display needed).

Two panels over the optimizer step: both loss curves (A solid, B dashed with markers, so the
curves stay visible where they overlap) and the difference B - A with a zero line; the title
gives the throughput ratio and, when measured on a CPU, says that the ratio means nothing for
FP8 there. matplotlib is optional (`trainer` extra): without it `available()` is False and the
caller falls back to the dependency-free chart of trainer.plot.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path


def available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def ab_figure(
    path: Path,
    a: tuple[str, dict[int, float]],
    b: tuple[str, dict[int, float]],
    ratio: float | None,
    cpu_note: str | None,
) -> None:
    """Write the A/B PNG to `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    (name_a, loss_a), (name_b, loss_b) = a, b
    steps = sorted(set(loss_a) & set(loss_b))
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(8, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 2]}
    )
    top.plot(steps, [loss_a[s] for s in steps], "-", color="tab:blue", lw=2.0, label=name_a)
    top.plot(
        steps,
        [loss_b[s] for s in steps],
        "--",
        color="tab:orange",
        lw=1.5,
        marker="o",
        markersize=3,
        markevery=max(1, len(steps) // 25),
        label=name_b,
    )
    top.set_ylabel("training loss (nats)")
    top.legend(loc="upper right")
    top.grid(alpha=0.3)
    diff = [loss_b[s] - loss_a[s] for s in steps]
    bottom.plot(steps, diff, "-", color="tab:red", lw=1.2, label=f"{name_b} - {name_a}")
    bottom.axhline(0.0, color="black", lw=0.8)
    bottom.set_xlabel("optimizer step")
    bottom.set_ylabel(f"loss {name_b} - {name_a}")
    bottom.legend(loc="upper right")
    bottom.grid(alpha=0.3)
    bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
    title = f"{name_b} vs {name_a}: loss per step"
    if ratio is not None:
        title += f" | throughput {name_b}/{name_a} x{ratio:.2f} (steady state)"
    top.set_title(title, fontsize=11)
    if cpu_note:
        fig.text(0.5, 0.005, cpu_note, ha="center", va="bottom", fontsize=9, color="tab:red")
    fig.tight_layout(rect=(0, 0.03 if cpu_note else 0, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)
