"""`trainimg preflight --html FILE`: the fleet's report as one self-contained page.

What the text report says, for a browser: the count line, the hosts per verdict, the hosts that
warn or block grouped by their deciding reason with its fix once, then one table per verdict
(worst first) of host, verdicts, reason, finding and fix. A filter box and one checkbox per
verdict narrow the tables as you type; "shown N of M hosts" says how many rows are left, and
`FILE#q=TEXT` opens the page filtered by TEXT (a link to, say, one reason's hosts).

Self-contained: the style and the script are in the page, nothing is fetched when it is viewed
(its Content-Security-Policy forbids every load: `default-src 'none'`), so it can be mailed or
opened from an air-gapped share. Every host and record string is HTML-escaped (a record can
hold anything), and the script treats the page's text as text (no innerHTML).
"""

from __future__ import annotations

import html
from collections.abc import Iterable

from builder.host.shown import printable
from builder.judgement.kind import DEFAULT_FAIL_ON, Kind
from builder.judgement.severity import BLOCK, OK, WARN
from builder.preflight.report import (
    HostReport,
    blocking_text,
    count_line,
    reason_counts,
    reason_groups,
    verdict_counts,
)

_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'"
_ORDER = (BLOCK, WARN, OK)  # the tables, worst first; any other verdict comes after

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1b1b1b; }
h1 { font-size: 1.3em; margin: 0 0 .3em; }
h2 { font-size: 1.1em; margin: 1.4em 0 .4em; }
.counts span { display: inline-block; padding: .3em .8em; margin-right: .5em;
  border-radius: 4px; font-weight: 600; color: #fff; }
.block { background: #c62828; } .warn { background: #ef8f00; } .ok { background: #2e7d32; }
.other { background: #546e7a; }
table { border-collapse: collapse; width: 100%; margin-bottom: 1em; }
th, td { text-align: left; vertical-align: top; padding: .25em .6em;
  border-bottom: 1px solid #ddd; }
th { background: #f2f2f2; }
td.fix { color: #333; font-style: italic; }
.filters { margin: 1em 0; padding: .6em; background: #f7f7f7; border-radius: 4px; }
.filters input[type=search] { width: 24em; }
"""

# Filters rows by the text box (any cell) and the verdict boxes; counts what is left. Only the
# page's own elements and textContent are read: nothing is written as markup.
_SCRIPT = """
(function () {
  var box = document.getElementById("filter");
  var checks = Array.prototype.slice.call(document.querySelectorAll("input[data-verdict]"));
  var rows = Array.prototype.slice.call(document.querySelectorAll("tr[data-verdict]"));
  var shown = document.getElementById("shown");
  function apply() {
    var needle = box.value.toLowerCase();
    var allowed = {};
    checks.forEach(function (c) { allowed[c.getAttribute("data-verdict")] = c.checked; });
    var n = 0;
    rows.forEach(function (r) {
      var ok = allowed[r.getAttribute("data-verdict")] !== false &&
        (needle === "" || r.textContent.toLowerCase().indexOf(needle) >= 0);
      r.style.display = ok ? "" : "none";
      if (ok) { n += 1; }
    });
    shown.textContent = "shown " + n + " of " + rows.length + " hosts";
  }
  if (location.hash.indexOf("#q=") === 0) {  // a link to a filtered view: page.html#q=v100
    box.value = decodeURIComponent(location.hash.slice(3));
  }
  box.addEventListener("input", apply);
  checks.forEach(function (c) { c.addEventListener("change", apply); });
  apply();
})();
"""


def _e(text: object) -> str:
    """Host and record text for the page: printable characters only, then HTML-escaped."""
    return html.escape(printable(text), quote=True)


def _kind(verdict: str) -> str:
    return verdict if verdict in ("block", "warn", "ok") else "other"


def _counts(reports: list[HostReport]) -> list[str]:
    spans = [
        f'<span class="{_kind(v)}" data-count="{_e(v)}">{n} {_e(v)}</span>'
        for v, n in verdict_counts(reports).items()
    ]
    return ['<p class="counts">', *spans, "</p>"]


def _groups(reports: list[HostReport]) -> list[str]:
    """The hosts that warn or block, by deciding reason and fix (as the text report's)."""
    ranked = reason_groups(reports)
    if not ranked:
        return []
    head = "".join(f"<th>{h}</th>" for h in ("verdict", "reason", "hosts", "finding", "fix"))
    out = ["<h2>By reason</h2>", "<table>", f"<tr>{head}</tr>"]
    for (sev, code, fix), members in ranked:
        top = members[0].top
        assert top is not None
        names = ", ".join(m.host for m in members)
        out.append(
            f'<tr><td><span class="{_kind(str(sev))}">{_e(sev)}</span></td><td>{_e(code)}</td>'
            f"<td>{len(members)}: {_e(names)}</td><td>{_e(top.message)}</td>"
            f'<td class="fix">{_e(fix)}</td></tr>'
        )
    out.append("</table>")
    return out


def _host_rows(reports: Iterable[HostReport]) -> list[str]:
    out = []
    for r in reports:
        top = r.top
        plan = _e(r.verdict) if r.planned else ""
        reason, finding, fix = (
            (blocking_text(r) or top.code, top.message, top.remediation)
            if top is not None
            else ("", "", "")
        )
        out.append(
            f'<tr data-verdict="{_e(r.verdict)}"><td>{_e(r.host)}</td>'
            f"<td>{_e(r.now_verdict)}</td><td>{plan}</td><td>{_e(reason)}</td>"
            f'<td>{_e(finding)}</td><td class="fix">{_e(fix)}</td></tr>'
        )
    return out


def _tables(reports: list[HostReport]) -> list[str]:
    by: dict[str, list[HostReport]] = {}
    for r in reports:
        by.setdefault(str(r.verdict), []).append(r)
    order = [str(s) for s in _ORDER] + sorted(set(by) - {str(s) for s in _ORDER})
    out = []
    for verdict in [v for v in order if v in by]:
        out += [
            f'<h2 id="{_e(verdict)}"><span class="{_kind(verdict)}">{_e(verdict)}</span> '
            f"{len(by[verdict])} host(s)</h2>",
            f'<table data-table="{_e(verdict)}">',
            "<tr><th>host</th><th>now</th><th>plan</th><th>reason</th><th>finding</th>"
            "<th>fix</th></tr>",
            *_host_rows(by[verdict]),
            "</table>",
        ]
    return out


def _filters(reports: list[HostReport]) -> list[str]:
    boxes = [
        f'<label><input type="checkbox" checked data-verdict="{_e(v)}"> {_e(v)}</label>'
        for v in verdict_counts(reports)
    ]
    return [
        '<div class="filters"><input id="filter" type="search" placeholder="filter hosts, '
        'reasons, findings" aria-label="filter">',
        *boxes,
        '<span id="shown"></span></div>',
    ]


def render_html(
    reports: list[HostReport], target: str | None, fail_on: frozenset[Kind] = DEFAULT_FAIL_ON
) -> str:
    """The whole page for `reports` (one host or a fleet); `target` the planned driver."""
    title = f"trainimg preflight: {len(reports)} host(s)" + (f", target {target}" if target else "")
    reasons = ", ".join(f"{c} {n}" for c, n in reason_counts(reports).items())
    body = [
        f"<h1>{_e(title)}</h1>",
        f'<p id="count-line">{_e(count_line(reports, target, fail_on))}</p>',
        *_counts(reports),
        *([f"<p>hosts per reason: {_e(reasons)}</p>"] if reasons else []),
        *_groups(reports),
        *_filters(reports),
        *_tables(reports),
    ]
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
            f"<title>{_e(title)}</title>",
            f"<style>{_STYLE}</style></head><body>",
            *body,
            f"<script>{_SCRIPT}</script>",
            "</body></html>",
            "",
        ]
    )
