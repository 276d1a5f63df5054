"""The --compare figure: one content (AbFigure), drawn with matplotlib's Agg backend when it is
installed (the `trainer` extra) and with the dependency-free chart of trainer.plot otherwise
(the images ship no matplotlib), so both show the same things:

- two panels over the optimizer step with axis titles: both loss curves (A solid and wide, B
  dashed with markers on top, so B never hides A where they overlap) and B - A with a zero line;
- the title with the throughput ratio B/A (steady state);
- a dashed vertical line where a side stopped, labelled with the side, the step and the reason;
- the CPU note (the ratio means nothing for FP8 there) in red.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

from trainer.plot import PALETTE, RED, Mark, Panel, Series, chart

X_LABEL = "optimizer step"
LOSS_LABEL = "training loss (nats)"


@dataclass(frozen=True)
class Stop:
    step: int
    label: str  # "fp8 stopped at step 7: loss is nan"


@dataclass(frozen=True)
class AbFigure:
    a: str
    b: str
    loss_a: list[tuple[int, float]]
    loss_b: list[tuple[int, float]]
    ratio: float | None
    stops: list[Stop] = field(default_factory=list)
    note: str | None = None  # the CPU note

    @property
    def title(self) -> str:
        title = f"{self.b} vs {self.a}: loss per step"
        if self.ratio is not None:
            title += f" | throughput {self.b}/{self.a} x{self.ratio:.2f} (steady state)"
        return title

    @property
    def diff(self) -> list[tuple[int, float]]:
        b = dict(self.loss_b)
        return [(step, b[step] - loss) for step, loss in self.loss_a if step in b]

    @property
    def diff_label(self) -> str:
        return f"loss {self.b} - {self.a}"


def matplotlib_available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def write_png(path: Path, fig: AbFigure) -> str:
    """Draw `fig` into `path`; returns which renderer drew it (matplotlib or builtin)."""
    if matplotlib_available():
        _matplotlib(path, fig)
        return "matplotlib"
    path.write_bytes(builtin_chart(fig))
    return "builtin"


def builtin_panels(fig: AbFigure) -> tuple[Panel, Panel]:
    """The two panels of the built-in chart (what a test can inspect besides the pixels)."""
    marks = [Mark(stop.step, stop.label, RED) for stop in fig.stops]
    losses = Panel(
        f"loss per step: {fig.a} vs {fig.b}",
        [
            Series(fig.a, fig.loss_a, width=4),
            Series(fig.b, fig.loss_b, width=2, dash=6, markers=True),
        ],
        x_label=X_LABEL,
        y_label=LOSS_LABEL,
        marks=marks,
    )
    zero = [(fig.diff[0][0], 0.0), (fig.diff[-1][0], 0.0)] if fig.diff else []
    difference = Panel(
        f"difference {fig.diff_label}",
        [Series(f"{fig.b} - {fig.a}", fig.diff), Series("zero", zero, width=1)],
        x_label=X_LABEL,
        y_label=fig.diff_label,
        marks=marks,
    )
    return losses, difference


def builtin_chart(fig: AbFigure) -> bytes:
    notes = tuple((stop.label, RED) for stop in fig.stops)
    if fig.note:
        notes += ((fig.note, RED),)
    return chart(list(builtin_panels(fig)), title=fig.title, notes=notes)


def _matplotlib(path: Path, fig: AbFigure) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    figure, (top, bottom) = plt.subplots(
        2, 1, figsize=(8, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 2]}
    )
    blue, orange = (tuple(c / 255 for c in rgb) for rgb in PALETTE[:2])
    steps_a, values_a = zip(*fig.loss_a, strict=True) if fig.loss_a else ((), ())
    steps_b, values_b = zip(*fig.loss_b, strict=True) if fig.loss_b else ((), ())
    top.plot(steps_a, values_a, "-", color=blue, lw=2.0, label=fig.a)
    top.plot(
        steps_b,
        values_b,
        "--",
        color=orange,
        lw=1.5,
        marker="o",
        markersize=3,
        markevery=max(1, len(steps_b) // 25),
        label=fig.b,
    )
    top.set_ylabel(LOSS_LABEL)
    top.grid(alpha=0.3)
    diff_steps = [s for s, _ in fig.diff]
    bottom.plot(diff_steps, [d for _, d in fig.diff], "-", color="tab:red", lw=1.2)
    bottom.axhline(0.0, color="black", lw=0.8)
    bottom.set_xlabel(X_LABEL)
    bottom.set_ylabel(fig.diff_label)
    bottom.grid(alpha=0.3)
    bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
    for stop in fig.stops:
        for axes in (top, bottom):
            axes.axvline(stop.step, color="tab:red", ls="--", lw=1.2)
        right_half = stop.step > (fig.loss_a[0][0] + fig.loss_a[-1][0]) / 2 if fig.loss_a else False
        top.annotate(
            f" {stop.label} ",
            (stop.step, 0.03),
            xycoords=("data", "axes fraction"),
            ha="right" if right_half else "left",
            color="tab:red",
        )
    top.legend(loc="upper right")
    top.set_title(fig.title, fontsize=11)
    notes = [fig.note] if fig.note else []
    if notes:
        figure.text(0.5, 0.005, notes[0], ha="center", va="bottom", fontsize=9, color="tab:red")
    figure.tight_layout(rect=(0, 0.03 if notes else 0, 1, 1))
    figure.savefig(path, dpi=100)
    plt.close(figure)
