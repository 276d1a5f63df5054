"""What a check says: one type for every domain, so reports, exit codes and JSON agree."""

from __future__ import annotations

from dataclasses import dataclass

from builder.facts.sources import Source
from builder.judgement.severity import Severity


@dataclass(frozen=True)
class Finding:
    """One check's word on one subject.

    id: the registered check id (`host.os`, `os.python`, `images.impact`, `train_bf16`);
    subject: what it is about where the context does not say it (a matrix axis for file:line,
    an image, a GPU), None when the judged thing is the subject; remediation: what to do about
    a warn/block, empty when nothing is to be done; sources: where each fact it rests on is
    published; reason: a stable reason code (builder/judgement/reasons.py) where the finding is
    one of the image x host judgement's, "" otherwise (the check id then names it).
    """

    id: str
    severity: Severity
    message: str
    remediation: str = ""
    sources: tuple[Source, ...] = ()
    subject: str | None = None
    reason: str = ""

    @property
    def code(self) -> str:
        """What a fleet report counts: the reason code, else the check id."""
        return self.reason or self.id

    def paired_json(self) -> dict[str, str]:
        """{code, severity, message}: the one shape a finding has in every command's JSON
        (docs/json.md); preflight's host checks keep as_json's fuller record."""
        return {"code": self.code, "severity": str(self.severity), "message": self.message}

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "reason": self.code,
            "severity": str(self.severity),
            "finding": self.message,
            "remediation": self.remediation,
            "sources": [str(s) for s in self.sources],
        }
