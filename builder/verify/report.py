"""Collect the suite's outcomes (a pytest plugin) and write them: a readable summary and JSON.
JUnit XML comes from pytest's own --junitxml."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from builder.judgement.finding import Finding
from builder.judgement.severity import BLOCK, OK, SKIP, Severity, worst

OUTCOMES = ("passed", "failed", "error", "skipped")
# pytest's outcome on the one severity scale: a failed check and a broken one (an error in a
# fixture or the collection) both block; a skipped one says why it could not apply.
OUTCOME_SEVERITY: dict[str, Severity] = {
    "passed": OK,
    "failed": BLOCK,
    "error": BLOCK,
    "skipped": SKIP,
}


@dataclass(frozen=True)
class CheckResult:
    """One check's result: its Finding (id: the check's name, test_torch_version ->
    torch_version; message: the failure or the skip reason, empty when it passed) and pytest's
    outcome beside it, which the report prints: `error` (the check could not run) reads
    differently from `failed` although both block."""

    finding: Finding
    outcome: str  # passed | failed | error | skipped
    details: tuple[str, ...] = ()  # what a passing check saw
    seconds: float = 0.0

    @classmethod
    def of(
        cls,
        name: str,
        outcome: str,
        message: str = "",
        details: tuple[str, ...] = (),
        seconds: float = 0.0,
    ) -> CheckResult:
        return cls(Finding(name, OUTCOME_SEVERITY[outcome], message), outcome, details, seconds)

    @property
    def name(self) -> str:
        return self.finding.id

    @property
    def message(self) -> str:
        return self.finding.message

    @property
    def severity(self) -> Severity:
        return self.finding.severity

    def as_json(self) -> dict[str, Any]:
        """The paired {code, severity, message} of every command's JSON (code: the check's
        name), then pytest's own word (outcome) and what the check measured."""
        return {
            **self.finding.paired_json(),
            "name": self.name,
            "outcome": self.outcome,
            "details": list(self.details),
            "seconds": self.seconds,
        }


@dataclass
class _Tally:
    """A check's result while pytest reports its setup, call and teardown."""

    name: str
    outcome: str = "passed"
    message: str = ""
    details: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def result(self) -> CheckResult:
        return CheckResult.of(
            self.name, self.outcome, self.message, tuple(self.details), self.seconds
        )


def _message(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # a skip: (file, line, "Skipped: reason")
        return str(longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(longrepr, "reprcrash", None)
    text = str(crash.message) if crash is not None else str(longrepr or "")
    text = text.removeprefix("Failed: ")
    return text.strip().splitlines()[0] if text.strip() else ""


class Collector:
    """A pytest plugin: one CheckResult per test, in order."""

    def __init__(self) -> None:
        self.checks: dict[str, _Tally] = {}
        # pytest exits INTERRUPTED, and calls this hook, for a Ctrl-C and for a suite that
        # failed to collect alike (its Session.Interrupted is a KeyboardInterrupt); only the
        # exception's own type says which.
        self.keyboard_interrupt = False

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        self.keyboard_interrupt = not isinstance(excinfo.value, pytest.Session.Interrupted)

    def _check(self, nodeid: str) -> _Tally:
        name = nodeid.rsplit("::", 1)[-1].removeprefix("test_")
        return self.checks.setdefault(nodeid, _Tally(name))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        check = self._check(report.nodeid)
        check.seconds += report.duration
        for key, value in report.user_properties:
            if key == "detail" and str(value) not in check.details:
                check.details.append(str(value))
        if report.when == "call":
            if report.skipped:
                check.outcome, check.message = "skipped", _message(report)
            elif report.failed:
                check.outcome, check.message = "failed", _message(report)
        elif report.when == "setup" and report.skipped:
            check.outcome, check.message = "skipped", _message(report)
        elif report.failed and check.outcome != "failed":  # setup or teardown broke
            check.outcome, check.message = "error", f"{report.when}: {_message(report)}"

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.checks[report.nodeid or "collect"] = _Tally(
                "collect", "error", f"the suite could not be collected: {_message(report)}"
            )

    def results(self) -> list[CheckResult]:
        return [tally.result() for tally in self.checks.values()]


@dataclass
class Report:
    image: str
    image_id: str
    cell: str | None
    matrix: bool  # compared with a matrix cell, or with the labels only
    engine: str
    container: str
    gpu: dict[str, Any]
    checks: list[CheckResult]
    pytest_exit: int

    def counts(self) -> dict[str, int]:
        return {o: sum(1 for c in self.checks if c.outcome == o) for o in OUTCOMES}

    @property
    def ok(self) -> bool:
        """Nothing blocks and something passed (skipped is not passed), and pytest ran."""
        severities = [c.severity for c in self.checks]
        return worst(severities) is not BLOCK and OK in severities and self.pytest_exit in (0, 1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "image": self.image,
            "image_id": self.image_id,
            "cell": self.cell,
            "compared_with": "matrix" if self.matrix else "labels",
            "engine": self.engine,
            "container": self.container,
            "gpu": self.gpu,
            "ok": self.ok,
            "summary": self.counts(),
            "checks": [c.as_json() for c in self.checks],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def text(self) -> str:
        gpu = "GPU attached" if self.gpu.get("attached") else "no GPU"
        against = f"matrix cell {self.cell}" if self.matrix else "its labels (cell not in matrix)"
        lines = [f"trainimg verify {self.image} ({self.engine}, {gpu}) against {against}"]
        tag = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "skipped": "SKIP"}
        width = max((len(c.name) for c in self.checks), default=10)
        for c in self.checks:
            text = c.message if c.outcome != "passed" else "; ".join(c.details)
            lines.append(f"  {tag[c.outcome]:<5} {c.name:<{width}}  {text}")
        n = self.counts()
        verdict = "OK" if self.ok else "FAILED"
        lines.append(
            f"{verdict}: {len(self.checks)} checks: {n['passed']} passed, "
            f"{n['failed']} failed, {n['error']} errors, {n['skipped']} skipped "
            "(skipped is not passed)"
        )
        return "\n".join(lines)
