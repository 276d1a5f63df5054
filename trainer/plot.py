"""Line plots drawn into an RGB canvas (for the --compare PNG), with a 3x5 pixel font.

Deliberately small: a title and notes above the panels; per panel axes with axis titles, a
light grid with tick labels, one polyline per series (solid or dashed, with or without point
markers, so a curve drawn over another leaves it visible), vertical marks with a label (where a
run stopped) and a legend. Text is upper-cased; the font covers digits, letters and a little
punctuation.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Final

from trainer.png import encode_rgb

Color = tuple[int, int, int]

WHITE: Final = (255, 255, 255)
BLACK: Final = (0, 0, 0)
GRID: Final = (225, 225, 225)
PALETTE: Final = ((31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40))
RED: Final = (214, 39, 40)
_CHAR_W: Final = 8  # pixels per glyph at scale 2

_GLYPHS: Final = {
    "0": "XXX X.X X.X X.X XXX", "1": ".X. XX. .X. .X. XXX", "2": "XXX ..X XXX X.. XXX",
    "3": "XXX ..X XXX ..X XXX", "4": "X.X X.X XXX ..X ..X", "5": "XXX X.. XXX ..X XXX",
    "6": "XXX X.. XXX X.X XXX", "7": "XXX ..X ..X .X. .X.", "8": "XXX X.X XXX X.X XXX",
    "9": "XXX X.X XXX ..X XXX", "A": ".X. X.X XXX X.X X.X", "B": "XX. X.X XX. X.X XX.",
    "C": ".XX X.. X.. X.. .XX", "D": "XX. X.X X.X X.X XX.", "E": "XXX X.. XX. X.. XXX",
    "F": "XXX X.. XX. X.. X..", "G": ".XX X.. X.X X.X .XX", "H": "X.X X.X XXX X.X X.X",
    "I": "XXX .X. .X. .X. XXX", "J": "..X ..X ..X X.X .X.", "K": "X.X X.X XX. X.X X.X",
    "L": "X.. X.. X.. X.. XXX", "M": "X.X XXX XXX X.X X.X", "N": "XX. X.X X.X X.X X.X",
    "O": ".X. X.X X.X X.X .X.", "P": "XX. X.X XX. X.. X..", "Q": ".X. X.X X.X XX. .XX",
    "R": "XX. X.X XX. X.X X.X", "S": ".XX X.. .X. ..X XX.", "T": "XXX .X. .X. .X. .X.",
    "U": "X.X X.X X.X X.X XXX", "V": "X.X X.X X.X X.X .X.", "W": "X.X X.X XXX XXX X.X",
    "X": "X.X X.X .X. X.X X.X", "Y": "X.X X.X .X. .X. .X.", "Z": "XXX ..X .X. X.. XXX",
    ".": "... ... ... ... .X.", "-": "... ... XXX ... ...", ":": "... .X. ... .X. ...",
    "%": "X.X ..X .X. X.. X.X", "+": "... .X. XXX .X. ...", "/": "..X ..X .X. X.. X..",
    "(": ".X. X.. X.. X.. .X.", ")": ".X. ..X ..X ..X .X.", "_": "... ... ... ... XXX",
    ",": "... ... ... .X. X..", " ": "... ... ... ... ...", "=": "... XXX ... XXX ...",
    "|": ".X. .X. .X. .X. .X.", "<": "..X .X. X.. .X. ..X", ">": "X.. .X. ..X .X. X..",
}  # fmt: skip


class Canvas:
    def __init__(self, width: int, height: int, background: Color = WHITE) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray(bytes(background) * (width * height))

    def set(self, x: int, y: int, color: Color) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            i = (y * self.width + x) * 3
            self.pixels[i : i + 3] = bytes(color)

    def get(self, x: int, y: int) -> Color:
        i = (y * self.width + x) * 3
        return self.pixels[i], self.pixels[i + 1], self.pixels[i + 2]

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        for y in range(max(0, y0), min(self.height, y1 + 1)):
            for x in range(max(0, x0), min(self.width, x1 + 1)):
                self.set(x, y, color)

    def line(
        self, x0: int, y0: int, x1: int, y1: int, color: Color, width: int = 1, dash: int = 0
    ) -> None:
        """Bresenham, thickened to `width` pixels; `dash` > 0 draws `dash` pixels, skips as
        many, and so on."""
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        walked = 0
        while True:
            if not dash or (walked // dash) % 2 == 0:
                self.rect(x0, y0, x0 + width - 1, y0 + width - 1, color)
            walked += 1
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def text(self, x: int, y: int, text: str, color: Color = BLACK, scale: int = 2) -> int:
        """Draw `text` with its top-left at (x, y); returns the x after the last glyph."""
        for ch in text.upper():
            rows = _GLYPHS.get(ch, _GLYPHS[" "]).split()
            for gy, row in enumerate(rows):
                for gx, bit in enumerate(row):
                    if bit == "X":
                        self.rect(
                            x + gx * scale,
                            y + gy * scale,
                            x + (gx + 1) * scale - 1,
                            y + (gy + 1) * scale - 1,
                            color,
                        )
            x += 4 * scale
        return x

    def png(self) -> bytes:
        return encode_rgb(self.width, self.height, bytes(self.pixels))


@dataclass(frozen=True)
class Series:
    name: str
    points: list[tuple[int, float]]
    width: int = 2
    dash: int = 0  # pixels on, pixels off; 0 = solid
    markers: bool = False  # a small square on each point (at most about 30 of them)


@dataclass(frozen=True)
class Mark:
    """A vertical line at `x` with a label (e.g. where a run stopped)."""

    x: float
    label: str
    color: Color = RED


@dataclass(frozen=True)
class Panel:
    title: str
    series: list[Series]
    x_label: str = ""
    y_label: str = ""
    marks: list[Mark] = field(default_factory=list)


def _ticks(lo: float, hi: float, count: int) -> list[float]:
    return [lo + (hi - lo) * i / (count - 1) for i in range(count)]


def _step_ticks(lo: float, hi: float, count: int) -> list[int]:
    """Whole steps, at most `count` of them, each once."""
    every = max(1, math.ceil((hi - lo) / (count - 1)))
    return list(range(math.ceil(lo), math.floor(hi) + 1, every))


def _tick_label(value: float, spacing: float) -> str:
    """Enough decimals to tell neighbouring ticks apart."""
    decimals = min(6, max(0, 1 - math.floor(math.log10(spacing)))) if spacing > 0 else 3
    text = f"{value:.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def _draw_panel(canvas: Canvas, panel: Panel, top: int, height: int) -> None:
    left, right, bottom = 70, canvas.width - 20, top + height - 44
    plot_top = top + 44
    xs = [x for s in panel.series for x, _ in s.points] + [m.x for m in panel.marks]
    ys = [y for s in panel.series for _, y in s.points if math.isfinite(y)]
    if not xs or not ys:
        canvas.text(left, top + 10, panel.title)
        canvas.text(left, top + height // 2, "no finite values")
        return
    x_lo, x_hi = min(xs), max(xs)
    y_lo, y_hi = min(ys), max(ys)
    pad = (y_hi - y_lo) * 0.05 or 0.5
    y_lo, y_hi = y_lo - pad, y_hi + pad
    x_span = (x_hi - x_lo) or 1

    def px(x: float) -> int:
        return round(left + (x - x_lo) / x_span * (right - left))

    def py(y: float) -> int:
        return round(bottom - (y - y_lo) / (y_hi - y_lo) * (bottom - plot_top))

    for y in _ticks(y_lo, y_hi, 5):
        canvas.line(left, py(y), right, py(y), GRID)
        canvas.text(4, py(y) - 5, _tick_label(y, (y_hi - y_lo) / 4))
    for x in _step_ticks(x_lo, x_hi, 8):
        canvas.line(px(x), plot_top, px(x), bottom, GRID)
        canvas.text(px(x) - 4, bottom + 6, str(x))
    canvas.line(left, plot_top, left, bottom, BLACK)
    canvas.line(left, bottom, right, bottom, BLACK)
    canvas.text(left, top + 8, panel.title)
    canvas.text(4, top + 26, panel.y_label)  # the y axis title, above its axis
    canvas.text(right - len(panel.x_label) * _CHAR_W, bottom + 22, panel.x_label)
    for mark in panel.marks:
        canvas.line(px(mark.x), plot_top, px(mark.x), bottom, mark.color, width=2, dash=6)
        width = len(mark.label) * _CHAR_W
        label_x = px(mark.x) + 6 if px(mark.x) + 6 + width <= right else px(mark.x) - 6 - width
        canvas.text(max(left + 4, label_x), bottom - 16, mark.label, mark.color)
    legend_y = plot_top + 8
    for color, s in zip(PALETTE, panel.series, strict=False):
        pts = [(px(x), py(y)) for x, y in s.points if math.isfinite(y)]
        for (x0, y0), (x1, y1) in itertools.pairwise(pts):
            canvas.line(x0, y0, x1, y1, color, width=s.width, dash=s.dash)
        if s.markers:
            for x, y in pts[:: max(1, len(pts) // 30)]:
                canvas.rect(x - 2, y - 2, x + 2, y + 2, color)
        canvas.line(right - 170, legend_y + 4, right - 142, legend_y + 4, color, s.width, s.dash)
        canvas.text(right - 132, legend_y, s.name)
        legend_y += 18


def _wrap(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` characters, broken at spaces."""
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word[:width])
    return lines


def chart(
    panels: list[Panel],
    width: int = 720,
    panel_height: int = 320,
    title: str = "",
    notes: tuple[tuple[str, Color], ...] = (),
) -> bytes:
    """A PNG: the title and notes (each in its colour) on top, then the panels stacked top to
    bottom, each with its own axes."""
    per_line = (width - 20) // _CHAR_W
    header = [(line, BLACK) for line in _wrap(title, per_line)]
    for note, color in notes:
        header += [(line, color) for line in _wrap(note, per_line)]
    head = 14 * len(header) + (10 if header else 0)
    canvas = Canvas(width, head + panel_height * len(panels))
    for i, (line, color) in enumerate(header):
        canvas.text(10, 8 + 14 * i, line, color)
    for i, panel in enumerate(panels):
        _draw_panel(canvas, panel, head + i * panel_height, panel_height)
    return canvas.png()
