"""The one severity scale: matrix rules, host preflight, image impact and verify share it."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class Severity(StrEnum):
    """Ordered: a judgement is as bad as its worst finding.

    skip: not applicable here, or nothing to judge (never changes an exit code);
    ok: a fact that admits; warn: true and worth knowing; block: it stops what is judged (the
    cell cannot be built, the upgrade must not go ahead, the image will not run, a check failed).
    """

    SKIP = "skip"
    OK = "ok"
    WARN = "warn"
    BLOCK = "block"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Severity.SKIP: 0, Severity.OK: 1, Severity.WARN: 2, Severity.BLOCK: 3}
SKIP, OK, WARN, BLOCK = Severity.SKIP, Severity.OK, Severity.WARN, Severity.BLOCK


def worst(severities: Iterable[Severity]) -> Severity:
    """The judgement's verdict: its worst finding (skip when there is none)."""
    return max(severities, key=lambda s: s.rank, default=SKIP)
