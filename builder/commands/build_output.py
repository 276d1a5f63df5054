"""What `trainimg build` prints: each cell's build lines on the console (its stage and step,
and a heartbeat while a step is silent) and the summary table at the end, which fits the
terminal's width without cutting a cell name."""

from __future__ import annotations

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from builder.build.builder import Outcome, Ui
from builder.engines.base import short_id
from builder.engines.build_log import STEP_LINE, StagePosition
from builder.progress import Progress, RunningStep


class RichUi(Ui):
    """The build's lines on the console; each cell's build a progress step whose heartbeat
    says its stage and step (`build CELL: 40 s, stage 2/3, step 5/9`) while a step is silent."""

    def __init__(
        self,
        console: Console,
        *,
        multi: bool,
        quiet: bool,
        progress: Progress | None = None,
    ) -> None:
        self.console = console
        self.multi = multi
        self.quiet = quiet
        self.progress = progress
        self._steps: dict[str, RunningStep] = {}
        self._where: dict[str, StagePosition] = {}

    def _prefix(self, cell: str) -> str:
        return f"{cell} | " if self.multi else "  "

    def started(self, cell: str) -> None:
        where = self._where[cell] = StagePosition()
        if self.progress is not None:
            self._steps[cell] = self.progress.begin(f"build {cell}", lambda: str(where))

    def finished(self, cell: str) -> None:
        step = self._steps.pop(cell, None)
        if step is not None:
            step.end()
        self._where.pop(cell, None)

    def line(self, cell: str, text: str) -> None:
        where = self._where.get(cell)
        step = where.see(text) if where is not None else bool(STEP_LINE.match(text))
        if cell in self._steps:
            self._steps[cell].touch(text)
        if self.quiet and not step:
            return
        style = "bold cyan" if step else ("dim" if text.startswith("-->") else "")
        parts: list[tuple[str, str] | str] = [(self._prefix(cell), "dim")]
        if step and where is not None and where.stages is None:  # Docker's: say the stage
            parts.append((f"(stage {where.stage}) ", "cyan"))
        parts.append((text, style))
        self.console.print(Text.assemble(*parts), highlight=False, soft_wrap=True)

    def event(self, cell: str, text: str) -> None:
        self.console.print(
            Text.assemble(("==> ", "bold green"), (cell, "bold"), f": {text}"),
            highlight=False,
            soft_wrap=True,
        )


def _size(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


_STYLES = {"built": "green", "skipped": "blue", "failed": "red", "cancelled": "yellow"}


def _summary_table(outcomes: list[Outcome], width: int) -> Table:
    """The summary as one row per cell when that fits `width`; else each cell's name and
    result on one line and the other columns on a line under it, so a narrow terminal
    (80 columns) never sees a cell name cut."""
    rows = [
        (
            o.cell,
            Text(o.status if o.status != "skipped" else "up to date", _STYLES[o.status]),
            f"{o.seconds:.1f}s",
            short_id(o.image_id) if o.image_id else "-",
            _size(o.size) if o.size else "-",
            f"{o.cached_steps}/{o.steps}" if o.steps else "-",
        )
        for o in outcomes
    ]
    table = Table(title="trainimg build", title_justify="left")
    for col in ("cell", "result", "time", "image", "size", "cached steps"):
        table.add_column(col, no_wrap=True)
    for row in rows:
        table.add_row(*row)
    unbounded = Console(width=1000)
    if Measurement.get(unbounded, unbounded.options, table).maximum <= width:
        return table
    narrow = Table(title="trainimg build", title_justify="left")
    narrow.add_column("cell\n  time, image, size, cached steps", no_wrap=True)
    narrow.add_column("result", no_wrap=True)
    for cell, result, *rest in rows:
        narrow.add_row(Text.assemble(cell, ("\n  " + "  ".join(rest), "dim")), result)
    return narrow


def summary(console: Console, outcomes: list[Outcome]) -> None:
    console.print(_summary_table(outcomes, console.width))
    for o in outcomes:
        if o.status != "failed":
            continue
        console.print(  # wrapped to the terminal: the cell name comes first, whole
            Text.assemble(("FAILED ", "bold red"), (o.cell, "bold"), f": {o.error}"),
            highlight=False,
            soft_wrap=False,
        )
        if o.log_tail:
            console.print(Text(f"  last {len(o.log_tail)} lines of its log:", "dim"))
            for line in o.log_tail:
                console.print(Text(f"  | {line}"), highlight=False, soft_wrap=True)
