"""A host's report (checks + image impact) and the fleet's: text, JSON and the exit code.

Two verdicts per host: `now` (the host as it is) and, with --target-driver, `plan` (the host
after the planned driver change). The plan's verdict is what a gate judges, so with a target it
decides the exit code: a plan that repairs a broken host passes.

Each finding has a kind (builder/judgement/kind.py: breaks, broken-now, never-ran, risk, info),
derived from its now and plan severities; the exit code is the worst kind's among those
`--fail-on` counts (docs/preflight.md has the table): 0 nothing counted, 1 the plan breaks
something, 4 broken now or never ran only (nothing the plan makes worse), 3 risks only; 2 is the
CLI's for bad input (an unparsable target version, an inventory that does not parse, no host at
all, a hostile record given alone, a fleet of records none of which can be judged).

The text report is for people: a fleet's summary first (hosts per verdict, then the hosts that
warn or block grouped by their deciding reason, its fix once per group, in full), then one line
per host (its verdicts and the reason that decides them), worst first, then how many hosts each
reason code affects; one host is its line and its fix. `--verbose` prints every check and the
image table of every host. `--jsonl` streams the hosts' JSON a line each, then a summary.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from builder.host.shown import printable
from builder.judgement.finding import Finding
from builder.judgement.kind import (
    BREAKS,
    BROKEN_NOW,
    DEFAULT_FAIL_ON,
    NEVER_RAN,
    RISK,
    Kind,
    exit_code_of_kinds,
    kind_of,
    worst_kind,
)
from builder.judgement.severity import OK, WARN, Severity, worst
from builder.preflight.impact import IMPACT_ID, Row
from builder.preflight.report_host import render_host
from builder.preflight.report_text import WIDTH, clause, fit, wrapped

# the version of as_json's shape (2: now/plan verdicts, reason codes; 3: each finding's,
# image row's and host's kind)
REPORT_SCHEMA = 3
BLOCKING = (BREAKS, BROKEN_NOW, NEVER_RAN)  # the kinds of a block


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

    def kinds(self) -> list[Kind]:
        """Each finding's kind, in `checks` order: from its now and plan severities (the same
        check's now finding), the image impact's from its image rows."""
        now = {c.id: c for c in self.now_checks or ()}
        out = []
        for c in self.checks:
            if c.id == IMPACT_ID and self.rows:
                out.append(worst_kind(r.kind for r in self.rows if r.image.gpu))
            elif not self.planned:
                out.append(kind_of(c.severity, None, planned=False))
            else:
                before = now.get(c.id)
                out.append(
                    kind_of(
                        before.severity if before is not None else None,
                        c.severity,
                        planned=True,
                        same_reason=before is not None and before.code == c.code,
                    )
                )
        return out

    @property
    def kind(self) -> Kind:
        """The host's worst kind."""
        return worst_kind(self.kinds())

    def now_kinds(self) -> list[Kind]:
        """The now findings' kinds, judged without a plan (`now_checks` order)."""
        return [kind_of(c.severity, None, planned=False) for c in self.now_checks or ()]

    @property
    def top(self) -> Finding | None:
        """The finding that decides the verdict: the worst kind, first in report order."""
        pairs = zip(self.checks, self.kinds(), strict=True)
        ranked = [(k.rank, -i, c) for i, (c, k) in enumerate(pairs) if k.rank >= RISK.rank]
        return max(ranked, key=lambda t: t[:2])[2] if ranked else None

    def blocking(self) -> list[tuple[Kind, list[str]]]:
        """Every reason that blocks, by kind (worst first): the codes of the blocking checks
        and, for the image impact, of every image that does not run."""
        by_kind: dict[Kind, list[str]] = {}
        for c, k in zip(self.checks, self.kinds(), strict=True):
            if k not in BLOCKING:
                continue
            if c.id == IMPACT_ID and self.rows:
                for r in self.rows:
                    if r.image.gpu and r.kind in BLOCKING:
                        by_kind.setdefault(r.kind, []).extend(r.blocking_codes())
            else:
                by_kind.setdefault(k, []).append(c.code)
        ranked = sorted(by_kind, key=lambda k: -k.rank)
        return [(k, list(dict.fromkeys(by_kind[k]))) for k in ranked]

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
            "kind": str(self.kind),
            "blocking": {str(k): codes for k, codes in self.blocking()},
            "top": _top_json(self.top, self),
            "facts": self.facts,
            "checks": _with_kinds(self.checks, self.kinds()),
            "now_checks": _with_kinds(self.now_checks, self.now_kinds())
            if self.now_checks is not None
            else None,
            "images": [r.as_json() for r in self.rows],
        }


def _with_kinds(findings: list[Finding], kinds: list[Kind]) -> list[dict[str, object]]:
    return [{**c.as_json(), "kind": str(k)} for c, k in zip(findings, kinds, strict=True)]


def _top_json(top: Finding | None, report: HostReport) -> dict[str, str] | None:
    if top is None:
        return None
    kind = report.kinds()[report.checks.index(top)]
    return {
        "reason": top.code,
        "kind": str(kind),
        "severity": str(top.severity),
        "finding": top.message,
        "fix": top.remediation,
    }


def exit_code_of(verdict: Severity) -> int:
    """The exit code of a verdict judged with no "now" (`trainimg compat`: a driver and GPU the
    image would move to): a block is what the move breaks (1), a warning a risk (3), else 0."""
    return exit_code_of_kinds([kind_of(None, verdict, planned=True)])


def exit_code(reports: list[HostReport], fail_on: frozenset[Kind] = DEFAULT_FAIL_ON) -> int:
    """The fleet's exit code: the worst kind of any host's findings that `fail_on` counts."""
    return exit_code_of_kinds((k for r in reports for k in r.kinds()), fail_on)


def reason_counts(reports: list[HostReport]) -> dict[str, int]:
    """How many hosts each reason code (a warning or a block) affects, most first."""
    counts: dict[str, int] = {}
    for r in reports:
        for code in r.codes():
            counts[code] = counts.get(code, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def verdict_counts(reports: list[HostReport]) -> dict[str, int]:
    """How many hosts have each verdict, worst first."""
    counts: dict[Severity, int] = {}
    for r in reports:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    return {str(s): n for s, n in sorted(counts.items(), key=lambda kv: -kv[0].rank)}


def as_json(
    reports: list[HostReport], target: str | None, fail_on: frozenset[Kind] = DEFAULT_FAIL_ON
) -> dict[str, Any]:
    return {
        "schema": REPORT_SCHEMA,
        "target_driver": target,
        "exit_code": exit_code(reports, fail_on),
        "reasons": reason_counts(reports),
        "hosts": [r.as_json() for r in reports],
    }


def fleet_json_lines(
    reports: list[HostReport], target: str | None, fail_on: frozenset[Kind] = DEFAULT_FAIL_ON
) -> Iterator[str]:
    """--jsonl: one line per host (as_json's `hosts` entries), then the summary line; made one
    at a time (a fleet's document is never held whole)."""
    for r in reports:
        yield json.dumps(r.as_json())
    summary = {
        "schema": REPORT_SCHEMA,
        "target_driver": target,
        "exit_code": exit_code(reports, fail_on),
        "hosts": len(reports),
        "verdicts": verdict_counts(reports),
        "reasons": reason_counts(reports),
    }
    yield json.dumps({"summary": summary})


def host_lines(report: HostReport, name_width: int, width: int = WIDTH) -> list[str]:
    """A host's line (verdicts, every blocking reason, the deciding finding as far as it fits
    `width`); reasons that do not fit one line wrap under the host's verdicts."""
    verdicts = f"{report.now_verdict!s:<5}"
    if report.planned:
        verdicts = f"now {report.now_verdict!s:<5} plan {report.verdict!s:<5}"
    head = f"{report.host:<{name_width}}  {verdicts}"
    top = report.top
    if top is None:
        return [f"{head}  {'nothing to fix' if report.verdict is OK else 'no finding'}"]
    reasons = blocking_text(report) or top.code
    message = fit(top.message, width - len(head) - len(reasons) - 4)
    line = f"{head}  {reasons}" + (f": {message}" if message else "")
    if len(line) <= width:
        return [line]
    return wrapped(f"{head}  ", reasons, 0, width)


def summary_lines(report: HostReport, name_width: int, width: int = WIDTH) -> list[str]:
    """A host in one line (verdicts, the deciding reason), plus its fix in full."""
    lines = host_lines(report, name_width, width)
    top = report.top
    if top is not None and top.remediation:
        lines += wrapped("fix: ", top.remediation, name_width + 2, width)
    return lines


def blocking_text(report: HostReport) -> str:
    """Every blocking reason of a host, by kind, worst first ("breaks gpu.branch-dropped,
    gpu.open-unsupported; never-ran image.no-kernel-image"); "" when nothing blocks."""
    return "; ".join(f"{kind} {', '.join(codes)}" for kind, codes in report.blocking())


GROUP_NAMES = 8  # hosts named in a reason group of the fleet summary (then "and N more")


def reason_groups(
    reports: list[HostReport],
) -> list[tuple[tuple[Severity, str, str], list[HostReport]]]:
    """The hosts that warn or block, grouped by (severity, reason code, fix) of the finding
    that decides them: worst first, then the most hosts (the text and HTML reports' groups)."""
    groups: dict[tuple[Severity, str, str], list[HostReport]] = {}
    for r in reports:
        top = r.top
        if top is not None:
            groups.setdefault((top.severity, top.code, top.remediation), []).append(r)
    return sorted(groups.items(), key=lambda kv: (-kv[0][0].rank, -len(kv[1]), kv[0][1]))


def _group_lines(reports: list[HostReport], width: int = WIDTH) -> list[str]:
    """The fleet's reason groups as text, each group's fix printed once."""
    out: list[str] = []
    for (sev, code, fix), members in reason_groups(reports):
        names = [m.host for m in members[:GROUP_NAMES]]
        more = len(members) - len(names)
        named = ", ".join(names) + (f" and {more} more" if more else "")
        out += wrapped(f"{sev!s:<5}  {code}  {len(members)} host(s): ", named, 0, width)
        top = members[0].top
        assert top is not None
        out += wrapped("", clause(top.message, 2 * (width - 7)), 7, width)
        if fix:
            out += wrapped("fix: ", fix, 7, width)
    return out


def count_line(
    reports: list[HostReport],
    target: str | None,
    fail_on: frozenset[Kind] = DEFAULT_FAIL_ON,
    width: int = WIDTH,
) -> str:
    """The counts per verdict, the exit code and the target, on one line (`tail -1`): the
    reminder that the plan decides is left out where it would pass `width`."""
    parts = ", ".join(f"{n} {s}" for s, n in verdict_counts(reports).items())
    line = f"{len(reports)} host(s): {parts or 'none'}; exit {exit_code(reports, fail_on)}"
    if not target:
        return line
    line += f"; target {target}"
    decides = " (the plan's verdict decides)"
    return line + decides if len(line + decides) <= width else line


def render_fleet(
    reports: list[HostReport],
    target: str | None,
    *,
    verbose: bool = False,
    wide: bool = False,
    fail_on: frozenset[Kind] = DEFAULT_FAIL_ON,
    width: int | None = None,
) -> str:
    """One host: its line and fix. A fleet: the summary first (counts per verdict, the hosts
    that warn or block grouped by reason with the fix once per group), then one line per host,
    worst first; then the hosts per reason code and the count line again (for `tail -1`).
    Every line fits `width` (the terminal's: 80 columns too) but a single word wider than it;
    a host's line shows its finding as far as it fits, a fix is wrapped, never cut. None (not
    a terminal): lines of WIDTH, --verbose's image table aligned at any width."""
    lines_width = width or WIDTH
    out: list[str] = []
    if verbose:
        for r in reports:
            out += render_host(r, target, wide=wide, width=width)
            out.append("")
    elif len(reports) == 1:
        out += summary_lines(reports[0], min(len(reports[0].host), 32), lines_width)
        out.append("")
    else:
        out += [count_line(reports, target, fail_on, lines_width), ""]
        groups = _group_lines(reports, lines_width)
        if groups:
            out += [*groups, ""]
        name_width = min(max(len(r.host) for r in reports), 32)
        ranked = sorted(reports, key=lambda r: -r.verdict.rank)  # stable: input order kept
        for r in ranked:
            out += host_lines(r, name_width, lines_width)
        out.append("")
    counts = reason_counts(reports)
    if counts:
        per = ", ".join(f"{c} {n}" for c, n in counts.items())
        out += wrapped("hosts per reason: ", per, 0, lines_width)
    out.append(count_line(reports, target, fail_on, lines_width))
    # every line carries host and record strings: nothing but printable text reaches a terminal
    return "\n".join(printable(line) for line in out)
