"""A host's report (checks + image impact) and the fleet's: text, JSON and the exit code.

Exit codes (docs/preflight.md): 0 every check ok or skipped, 1 something blocks on some host
(an unreachable host blocks), 3 warnings only; 2 is the CLI's for bad input (an unparsable
target version, an inventory that does not parse, no host at all).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from builder.judgement.finding import Finding
from builder.judgement.severity import BLOCK, WARN, Severity, worst
from builder.preflight.impact import Row

EXIT_OK, EXIT_BLOCK, EXIT_WARN = 0, 1, 3  # 2, bad input, is the CLI's (TrainimgError)
REPORT_SCHEMA = 1  # the version of as_json's shape


@dataclass
class HostReport:
    host: str
    checks: list[Finding]
    rows: list[Row] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    reachable: bool = True

    @property
    def verdict(self) -> Severity:
        return worst([c.severity for c in self.checks])

    def as_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "reachable": self.reachable,
            "verdict": str(self.verdict),
            "facts": self.facts,
            "checks": [c.as_json() for c in self.checks],
            "images": [r.as_json() for r in self.rows],
        }


def exit_code_of(verdict: Severity) -> int:
    """The exit code of a verdict (preflight's and compat's): block 1, warn 3, else 0."""
    return EXIT_BLOCK if verdict is BLOCK else EXIT_WARN if verdict is WARN else EXIT_OK


def exit_code(reports: list[HostReport]) -> int:
    return exit_code_of(worst([r.verdict for r in reports]))


def as_json(reports: list[HostReport], target: str | None) -> dict[str, Any]:
    return {
        "schema": REPORT_SCHEMA,
        "target_driver": target,
        "exit_code": exit_code(reports),
        "hosts": [r.as_json() for r in reports],
    }


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def render_host(report: HostReport, target: str | None, *, wide: bool = False) -> list[str]:
    f = report.facts
    head = ", ".join(str(f[k]) for k in ("os", "kernel", "driver", "gpus") if f.get(k))
    lines = [f"== {report.host}" + (f" ({head})" if head else "") + " =="]
    width = 10_000 if wide else 100
    for c in report.checks:
        lines.append(f"  {c.severity!s:<5}  {c.id:<15}  {_cut(c.message, width)}")
        if c.remediation:  # every remediation JSON carries, ok ones included ("note:")
            label = "fix" if c.severity in (WARN, BLOCK) else "note"
            lines.append(f"  {'':<5}  {'':<15}  {label}: {_cut(c.remediation, width)}")
    gpu_rows = [r for r in report.rows if r.image.gpu]
    judged = any(v.status != "no-driver" for r in gpu_rows for v in (r.now, r.after) if v)
    if gpu_rows and judged:
        now = f"NOW {f.get('driver') or '(none)'}"
        header = (
            ["IMAGE", "SOURCE", now] + ([f"AFTER {target}", "CHANGE"] if target else []) + ["WHY"]
        )
        table = [header]
        for r in gpu_rows:
            shown = r.after if r.after is not None else r.now
            why = shown.reasons[0] if shown.reasons and shown.status != "ok" else ""
            if r.after is not None and not why and r.now.status != "ok" and r.now.reasons:
                why = f"now: {r.now.reasons[0]}"
            cells = [r.image.name, r.image.source, r.now.status]
            if target:
                cells += [r.after.status if r.after else "", r.change]
            table.append([*cells, _cut(why, 90 if not wide else 10_000)])
        lines.append("")
        lines += ["  " + line for line in _table(table)]
        skipped = len(report.rows) - len(gpu_rows)
        if skipped:
            lines.append(f"  ({skipped} CPU image(s) not shown)")
    lines.append(f"  verdict: {report.verdict}")
    return lines


def render_fleet(reports: list[HostReport], target: str | None, *, wide: bool = False) -> str:
    out: list[str] = []
    for r in reports:
        out += render_host(r, target, wide=wide)
        out.append("")
    by: dict[Severity, list[str]] = {}
    for r in reports:
        by.setdefault(r.verdict, []).append(r.host)
    parts = [
        f"{len(v)} {s}" + (f" ({', '.join(v[:5])})" if s in (BLOCK, WARN) else "")
        for s, v in sorted(by.items(), key=lambda kv: -kv[0].rank)
    ]
    code = exit_code(reports)
    out.append(
        f"{len(reports)} host(s): {', '.join(parts) or 'none'}; exit {code}"
        + (f"; target {target}" if target else "")
    )
    return "\n".join(out)
