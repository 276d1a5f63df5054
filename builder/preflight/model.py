"""What a check says (an id, a severity, the finding, the remediation and its sources), and
the plan every check judges against."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from builder.facts import drivers as driver_rules
from builder.facts.driver_version import DriverVersion
from builder.facts.sources import Source

if TYPE_CHECKING:
    from builder.preflight.gather import HostState


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


@dataclass(frozen=True)
class Plan:
    target: DriverVersion | None = None
    target_module: str | None = None  # open | proprietary, as asked; None: keep/derive
    strict: bool = False  # --strict: a driver branch past its end of life blocks

    def flavour(self, state: HostState) -> str | None:
        """The kernel-module flavour the upgrade installs: asked, else what runs now, else the
        branch's default (open from R560)."""
        if self.target is None:
            return None
        if self.target_module:
            return self.target_module
        if state.flavour:
            return state.flavour
        return (
            "open" if self.target.major >= driver_rules.OPEN_DEFAULT_FROM_BRANCH else "proprietary"
        )
