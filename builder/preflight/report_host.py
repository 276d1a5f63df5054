"""One host's whole report (`preflight --verbose`): every check with its fix or note, and the
table of its images now and after the plan, within the terminal's width unless --wide."""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.judgement.severity import BLOCK, WARN
from builder.preflight.report_text import WIDTH, clause, table_lines, wrapped

if TYPE_CHECKING:  # report.py imports this module: the class only for annotations
    from builder.preflight.report import HostReport


def render_host(
    report: HostReport, target: str | None, *, wide: bool = False, width: int | None = None
) -> list[str]:
    """Every check of a host and its image table (--verbose), within `width` (a terminal's)
    unless `wide`; None (not a terminal): the text at WIDTH, the table aligned whatever its
    width (for grep and awk)."""
    table_width = 10_000 if wide or width is None else width
    width = width or WIDTH
    f = report.facts
    head = ", ".join(str(f[k]) for k in ("os", "kernel", "driver", "gpus") if f.get(k))
    limit = 10_000 if wide else width
    lines = wrapped("== ", f"{report.host}" + (f" ({head})" if head else "") + " ==", 0, limit)
    for c in report.checks:
        code = f" [{c.reason}]" if c.reason else ""
        message = c.message if wide else clause(c.message, 2 * width)
        lines += wrapped(f"  {c.severity!s:<5}  {c.id:<15}  ", f"{message}{code}", 0, limit)
        if c.remediation:  # every remediation JSON carries, ok ones included ("note:")
            label = "fix: " if c.severity in (WARN, BLOCK) else "note: "
            lines += wrapped(label, c.remediation, 24, limit)
    gpu_rows = [r for r in report.rows if r.image.gpu]
    judged = any(v.status != "no-driver" for r in gpu_rows for v in (r.now, r.after) if v)
    if gpu_rows and judged:
        now = f"NOW {f.get('driver') or '(none)'}"
        header = (
            ["IMAGE", "SOURCE", now] + ([f"AFTER {target}", "CHANGE"] if target else []) + ["WHY"]
        )
        table = [header]
        for r in gpu_rows:
            shown = r.shown
            why = shown.reasons[0] if shown.reasons and shown.status != "ok" else ""
            if r.after is not None and not why and r.now.status != "ok" and r.now.reasons:
                why = f"now: {r.now.reasons[0]}"
            cells = [r.image.name, r.image.source, r.now.status]
            if target:
                cells += [r.after.status if r.after else "", r.change]
            table.append([*cells, why if wide else clause(why, 90)])
        lines.append("")
        rows = ["  " + line for line in table_lines(table)]
        fits = max(map(len, rows)) <= table_width
        lines += rows if fits else narrow_table(table, width)
        skipped = len(report.rows) - len(gpu_rows)
        if skipped:
            lines.append(f"  ({skipped} CPU image(s) not shown)")
    verdict = f"now {report.now_verdict}, plan {report.verdict}" if report.planned else ""
    lines.append(f"  verdict: {report.verdict}" + (f" ({verdict})" if verdict else ""))
    return lines


def narrow_table(table: list[list[str]], width: int) -> list[str]:
    """The image table for a narrow terminal: each image's name on its own line, its columns
    (named) on a line under it, its why wrapped under that; no value cut."""
    header, *rows = table
    out: list[str] = []
    for row in rows:
        *cells, why = row
        out.append(f"  {cells[0]}")
        pairs = zip(header[1:-1], cells[1:], strict=True)  # the last column is WHY
        named = "  ".join(f"{h.lower()}: {c}" for h, c in pairs if c)
        out += wrapped("", named, 6, width)
        if why:
            out += wrapped("why: ", why, 6, width)
    return out
