"""The quality gate's PNG, drawn with the dependency-free chart of trainer.plot (the images ship
no matplotlib): per trace (loss, grad norm) the reference mean, the band's edges and the
candidate, its outliers marked; the title carries the verdict."""

from __future__ import annotations

from typing import Any

from trainer.figure import LOSS_LABEL, X_LABEL
from trainer.plot import PALETTE, RED, Mark, Panel, Series, chart


def _panel(title: str, y_label: str, check: dict[str, Any], names: tuple[str, str]) -> Panel:
    steps = check["steps"]

    def points(key: str) -> list[tuple[int, float]]:
        return list(zip(steps, check[key], strict=True))

    reference, candidate = names
    # a mark per outlier, at most 12 of them, so the labels stay legible
    marks = [Mark(s, "", RED) for s in check["outside_steps"][:12]]
    return Panel(
        title,
        [
            Series(f"{reference} mean", points("mean"), width=3),
            Series(f"candidate {candidate}", points("candidate"), width=2, markers=True),
            Series("band low", points("lo"), width=1, dash=4),
            Series("band high", points("hi"), width=1, dash=4),
        ],
        x_label=X_LABEL,
        y_label=y_label,
        marks=marks,
    )


def png(doc: dict[str, Any]) -> bytes:
    names = (doc["reference"], doc["candidate"])
    seeds = len(doc["reference_seeds"])
    title = (
        f"gate {doc['candidate']} vs {doc['reference']} ({seeds} seeds, "
        f"band mean +- {doc['rule']['k']:g} sd): {doc['verdict']}"
    )
    panels = [
        _panel(
            f"loss: {doc['candidate']} in the {doc['reference']} band",
            LOSS_LABEL,
            doc["loss"],
            names,
        ),
        _panel("grad norm", "grad norm", doc["grad_norm"], names),
    ]
    notes = tuple((line, RED) for line in doc["why"])
    if not notes:
        notes = ((f"{doc['candidate']} stays within the band", PALETTE[2]),)
    return chart(panels, title=title, notes=notes)
