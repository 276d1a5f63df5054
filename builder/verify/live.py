"""One line per check as it finishes, while the suite runs (a pytest plugin beside the
Collector of report.py): `PASS versions`, `SKIP gpu_visible: no GPU attached`.

The suite runs with `-p no:terminal` (its JSON report and text summary are trainimg's own), so
without this nothing is shown for the many minutes the training checks take; the running
check is a progress step, so its heartbeat covers a long check too (builder/progress.py).
"""

from __future__ import annotations

import io
import os
import sys
from typing import TextIO

import pytest

from builder.progress import Progress, RunningStep
from builder.verify.report import Collector

TAGS = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "skipped": "SKIP"}


def stderr_beside_capture() -> TextIO:
    """stderr as the suite's progress must write it: pytest captures file descriptor 2 while a
    check runs, so a heartbeat written there would vanish; a second descriptor on the same file,
    taken before pytest starts, is not captured. sys.stderr itself where it has no descriptor
    (a test's capture object)."""
    try:
        fd = os.dup(sys.stderr.fileno())
    except (AttributeError, OSError, io.UnsupportedOperation):
        return sys.stderr
    return open(fd, "w", buffering=1, encoding="utf-8", errors="replace")


class CheckLines:
    """A pytest plugin: each check a progress step while it runs, and its outcome (from the
    Collector, so the line and the report never disagree) as one line when it ends."""

    def __init__(self, collector: Collector, progress: Progress) -> None:
        self._collector = collector
        self._progress = progress
        self._running: dict[str, RunningStep] = {}

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        name = nodeid.rsplit("::", 1)[-1].removeprefix("test_")
        self._running[nodeid] = self._progress.begin(f"verify {name}")

    @pytest.hookimpl(trylast=True)  # after the Collector has tallied the check's last report
    def pytest_runtest_logfinish(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        step = self._running.pop(nodeid, None)
        if step is not None:
            step.end()
        tally = self._collector.checks.get(nodeid)
        if tally is None:
            return
        result = tally.result()
        why = f": {result.message}" if result.outcome != "passed" and result.message else ""
        self._progress.say(f"{TAGS[result.outcome]:<5} {result.name} ({result.seconds:.1f} s){why}")
