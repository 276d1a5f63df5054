"""A host's report (checks + image impact) and the fleet's: text, JSON and the exit code.

Two verdicts per host: `now` (the host as it is) and, with --target-driver, `plan` (the host
after the planned driver change). The plan's verdict is what a gate judges, so with a target it
decides the exit code: a plan that repairs a broken host passes.

Exit codes (docs/preflight.md): 0 every check ok or skipped, 1 something blocks on some host
(an unreachable host blocks), 3 warnings only; 2 is the CLI's for bad input (an unparsable
target version, an inventory that does not parse, no host at all, a hostile record).

The text report is for people: one line per host (its verdicts and the reason that decides
them), the fix under it in full (wrapped, never cut), then how many hosts each reason code
affects; `--verbose` prints every check and the image table of every host.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Any

from builder.judgement.finding import Finding
from builder.judgement.severity import BLOCK, OK, WARN, Severity, worst
from builder.preflight.impact import Row

EXIT_OK, EXIT_BLOCK, EXIT_WARN = 0, 1, 3  # 2, bad input, is the CLI's (TrainimgError)
REPORT_SCHEMA = 2  # the version of as_json's shape (2: now/plan verdicts, reason codes)
WIDTH = 100  # the text report's line width


@dataclass
class HostReport:
    host: str
    checks: list[Finding]  # the plan's findings with a target, else the host's as it is
    rows: list[Row] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    reachable: bool = True
    now_checks: list[Finding] | None = None  # with a target: the host as it is

    @property
    def verdict(self) -> Severity:
        """What the gate judges: the plan's verdict with a target, else the host's now."""
        return worst([c.severity for c in self.checks])

    @property
    def now_verdict(self) -> Severity:
        return worst([c.severity for c in (self.now_checks or self.checks)])

    @property
    def planned(self) -> bool:
        return self.now_checks is not None

    @property
    def top(self) -> Finding | None:
        """The finding that decides the verdict: the worst, first in report order."""
        bad = [c for c in self.checks if c.severity.rank >= WARN.rank]
        return max(bad, key=lambda c: c.severity.rank) if bad else None

    def codes(self) -> list[str]:
        """The reason codes of every warning and block (once each)."""
        return list(dict.fromkeys(c.code for c in self.checks if c.severity.rank >= WARN.rank))

    def as_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "reachable": self.reachable,
            "verdict": str(self.verdict),
            "verdicts": {
                "now": str(self.now_verdict),
                "plan": str(self.verdict) if self.planned else None,
            },
            "top": _top_json(self.top),
            "facts": self.facts,
            "checks": [c.as_json() for c in self.checks],
            "now_checks": [c.as_json() for c in self.now_checks]
            if self.now_checks is not None
            else None,
            "images": [r.as_json() for r in self.rows],
        }


def _top_json(top: Finding | None) -> dict[str, str] | None:
    if top is None:
        return None
    return {
        "reason": top.code,
        "severity": str(top.severity),
        "finding": top.message,
        "fix": top.remediation,
    }


def exit_code_of(verdict: Severity) -> int:
    """The exit code of a verdict (preflight's and compat's): block 1, warn 3, else 0."""
    return EXIT_BLOCK if verdict is BLOCK else EXIT_WARN if verdict is WARN else EXIT_OK


def exit_code(reports: list[HostReport]) -> int:
    return exit_code_of(worst([r.verdict for r in reports]))


def reason_counts(reports: list[HostReport]) -> dict[str, int]:
    """How many hosts each reason code (a warning or a block) affects, most first."""
    counts: dict[str, int] = {}
    for r in reports:
        for code in r.codes():
            counts[code] = counts.get(code, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def as_json(reports: list[HostReport], target: str | None) -> dict[str, Any]:
    return {
        "schema": REPORT_SCHEMA,
        "target_driver": target,
        "exit_code": exit_code(reports),
        "reasons": reason_counts(reports),
        "hosts": [r.as_json() for r in reports],
    }


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def _clause(text: str, width: int) -> str:
    """The leading clauses of a finding that fit `width` (cut only between clauses, at "; ");
    a first clause longer than that is kept whole."""
    out = ""
    for part in text.split("; "):
        nxt = f"{out}; {part}" if out else part
        if out and len(nxt) > width:
            return out + "; ..."
        out = nxt
    return out


def _wrapped(label: str, text: str, indent: int, width: int = WIDTH) -> list[str]:
    """`label text` wrapped at word boundaries, every word kept (a fix is never cut)."""
    pad = " " * indent
    return textwrap.wrap(
        f"{label}{text}",
        width,
        initial_indent=pad,
        subsequent_indent=pad + " " * len(label),
        break_long_words=False,
        break_on_hyphens=False,
    )


def summary_lines(report: HostReport, name_width: int) -> list[str]:
    """A host in one line (verdicts, the deciding reason), plus its fix in full."""
    verdicts = f"{report.now_verdict!s:<5}"
    if report.planned:
        verdicts = f"now {report.now_verdict!s:<5} plan {report.verdict!s:<5}"
    head = f"{report.host:<{name_width}}  {verdicts}"
    top = report.top
    if top is None:
        return [f"{head}  {'nothing to fix' if report.verdict is OK else 'no finding'}"]
    room = max(WIDTH - len(head) - len(top.code) - 4, 30)
    lines = [f"{head}  {top.code}: {_clause(top.message, room)}"]
    if top.remediation:
        lines += _wrapped("fix: ", top.remediation, name_width + 2)
    return lines


def render_host(report: HostReport, target: str | None, *, wide: bool = False) -> list[str]:
    """Every check of a host and its image table (--verbose)."""
    f = report.facts
    head = ", ".join(str(f[k]) for k in ("os", "kernel", "driver", "gpus") if f.get(k))
    lines = [f"== {report.host}" + (f" ({head})" if head else "") + " =="]
    for c in report.checks:
        code = f" [{c.reason}]" if c.reason else ""
        message = c.message if wide else _clause(c.message, WIDTH)
        lines.append(f"  {c.severity!s:<5}  {c.id:<15}  {message}{code}")
        if c.remediation:  # every remediation JSON carries, ok ones included ("note:")
            label = "fix: " if c.severity in (WARN, BLOCK) else "note: "
            lines += _wrapped(label, c.remediation, 24, 10_000 if wide else WIDTH)
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
            table.append([*cells, why if wide else _clause(why, 90)])
        lines.append("")
        lines += ["  " + line for line in _table(table)]
        skipped = len(report.rows) - len(gpu_rows)
        if skipped:
            lines.append(f"  ({skipped} CPU image(s) not shown)")
    verdict = f"now {report.now_verdict}, plan {report.verdict}" if report.planned else ""
    lines.append(f"  verdict: {report.verdict}" + (f" ({verdict})" if verdict else ""))
    return lines


def render_fleet(
    reports: list[HostReport], target: str | None, *, verbose: bool = False, wide: bool = False
) -> str:
    out: list[str] = []
    if verbose:
        for r in reports:
            out += render_host(r, target, wide=wide)
            out.append("")
    else:
        width = min(max((len(r.host) for r in reports), default=4), 32)
        for r in reports:
            out += summary_lines(r, width)
        out.append("")
    counts = reason_counts(reports)
    if counts:
        out += _wrapped("hosts per reason: ", ", ".join(f"{c} {n}" for c, n in counts.items()), 0)
    by: dict[Severity, list[str]] = {}
    for r in reports:
        by.setdefault(r.verdict, []).append(r.host)
    parts = [
        f"{len(v)} {s}" + (f" ({', '.join(v[:5])})" if s in (BLOCK, WARN) else "")
        for s, v in sorted(by.items(), key=lambda kv: -kv[0].rank)
    ]
    code = exit_code(reports)
    decides = " (the plan's verdict decides)" if target else ""
    out.append(
        f"{len(reports)} host(s): {', '.join(parts) or 'none'}; exit {code}"
        + (f"; target {target}{decides}" if target else "")
    )
    return "\n".join(out)
