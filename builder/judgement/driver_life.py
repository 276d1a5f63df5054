"""A driver branch's standing on a day (pure): the one judgement of NVIDIA's lifecycle table that
the matrix rule `driver.eol`, preflight's `driver.version`/`driver.target` and the image
judgement all give, so that they never disagree about the same branch on the same day."""

from __future__ import annotations

import datetime as dt

from builder.facts import drivers as driver_rules
from builder.judgement.finding import Finding
from builder.judgement.reasons import REASONS
from builder.judgement.severity import BLOCK, WARN

LIFECYCLE_ID = "driver.lifecycle"
_CODE = {
    "supported": "driver.supported",
    "ending": "driver.eol-soon",
    "eol": "driver.eol",
    "unlisted": "driver.unlisted",
    "unknown": "driver.newer-than-table",
}


def branch_life(branch: int, today: dt.date, *, strict: bool = False) -> Finding:
    """The branch on `today`: supported, ending within the warning window, past its end of
    life (a block with `strict`), unlisted (older than the table's newest: out of support), or
    newer than the table."""
    status = driver_rules.branch_status(branch, today)
    reason = REASONS[_CODE[status.state]]
    severity = BLOCK if strict and status.past_eol else reason.severity
    return Finding(
        LIFECYCLE_ID,
        severity,
        status.text,
        reason.fix if severity.rank >= WARN.rank else "",
        (status.source,),
        reason=reason.code,
    )
