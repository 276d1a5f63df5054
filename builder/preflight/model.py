"""What a check says: an id, a severity, the finding, the remediation and its sources."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from builder.rules.sources import Source


class Severity(StrEnum):
    SKIP = "skip"  # not applicable here, or nothing to judge (never changes the exit code)
    OK = "ok"
    WARN = "warn"
    BLOCK = "block"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Severity.SKIP: 0, Severity.OK: 1, Severity.WARN: 2, Severity.BLOCK: 3}
SKIP, OK, WARN, BLOCK = Severity.SKIP, Severity.OK, Severity.WARN, Severity.BLOCK


@dataclass(frozen=True)
class Check:
    id: str
    severity: Severity
    finding: str
    remediation: str = ""
    sources: tuple[Source, ...] = ()

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "severity": str(self.severity),
            "finding": self.finding,
            "remediation": self.remediation,
            "sources": [str(s) for s in self.sources],
        }


def worst(severities: list[Severity]) -> Severity:
    return max(severities, key=lambda s: s.rank, default=SKIP)
