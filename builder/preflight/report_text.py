"""The text report's lines (pure): a finding cut between clauses or words to fit, a fix
wrapped between words and never cut, a table aligned by column."""

from __future__ import annotations

import textwrap

from builder.host.shown import printable

WIDTH = 100  # the text report's line width where the terminal says none


def table_lines(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def clause(text: str, width: int) -> str:
    """The leading clauses of a finding that fit `width` (cut only between clauses, at "; ");
    a first clause longer than that is kept whole."""
    out = ""
    for part in text.split("; "):
        nxt = f"{out}; {part}" if out else part
        if out and len(nxt) > width:
            return out + "; ..."
        out = nxt
    return out


def wrapped(label: str, text: str, indent: int, width: int = WIDTH) -> list[str]:
    """`label text` wrapped at word boundaries, every word kept (a fix is never cut). Escaped
    first (builder/host/shown.py): textwrap would turn a newline or tab of a host's string into
    a space, and the report shows it as its escape instead."""
    pad = " " * indent
    label = printable(label)
    return textwrap.wrap(
        f"{label}{printable(text)}",
        width,
        initial_indent=pad,
        subsequent_indent=pad + " " * len(label),
        break_long_words=False,
        break_on_hyphens=False,
    )


def fit(text: str, room: int) -> str:
    """`text` within `room` columns: cut between clauses first (clause), then between words,
    marked "..."; "" when not even a word fits."""
    out = clause(text, room)
    if len(out) <= room:
        return out
    cut = out[: max(room - 4, 0)].rsplit(" ", 1)[0]
    return f"{cut} ..." if cut and room >= 8 else ""
