"""Strict CI: a green run means every test ran (docs/testing.md).

With CI=true (.ci/run sets it) a test may skip only for hardware this workplace does not have:
its reason names one in ALLOWED_SKIP_REASONS, or it is marked `gpu` and this machine has no
NVIDIA GPU. Any other skip - a missing tool, a failed download, too little disk - becomes a
failure naming the test and its reason, so nothing vanishes from a green run. Locally the same
tests skip with their reason, as before. Every run that skipped something ends with a table of
the skips and their reasons; a CI run also lists its 25 slowest test phases (--durations).

tests/conftest.py takes these hooks in; tests/test_strict_ci.py runs them on small test files.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path

import pytest

# The only skips a CI run accepts: what the hardware here cannot give. Written here only.
ALLOWED_SKIP_REASONS = ("needs an NVIDIA GPU", "needs a device the workplace does not have")
CI_DURATIONS = 25
# The NVIDIA kernel driver's own file: present wherever an NVIDIA GPU can be used.
NVIDIA_DRIVER = Path("/proc/driver/nvidia/version")

_STRICT = pytest.StashKey[bool]()
_REFUSED = pytest.StashKey[list[tuple[str, str]]]()


def strict_ci() -> bool:
    """CI=true (or 1, yes), as CI services and .ci/run set it."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def allowed_skip(reason: str, marked_gpu: bool, gpu_here: bool) -> bool:
    """May a CI run skip a test for this reason?"""
    return any(a in reason for a in ALLOWED_SKIP_REASONS) or (marked_gpu and not gpu_here)


def skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return text.removeprefix("Skipped: ")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_STRICT] = strict_ci()
    config.stash[_REFUSED] = []
    if config.stash[_STRICT] and config.option.durations is None:
        config.option.durations = CI_DURATIONS


def _refuse(
    config: pytest.Config, report: pytest.TestReport | pytest.CollectReport, reason: str
) -> None:
    config.stash[_REFUSED].append((report.nodeid, reason))
    report.outcome = "failed"
    report.longrepr = (
        f"{report.nodeid} did not run: skipped for {reason!r}, which is not a reason CI accepts "
        f"(CI=true allows only: {'; '.join(ALLOWED_SKIP_REASONS)}; or a `gpu` test on a machine "
        "without an NVIDIA GPU). Give this machine what the reason names (scripts/setup.sh "
        "installs the tools), or fix the test."
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    config = item.config
    if report.skipped and not hasattr(report, "wasxfail") and config.stash[_STRICT]:
        reason = skip_reason(report)
        marked_gpu = item.get_closest_marker("gpu") is not None
        if not allowed_skip(reason, marked_gpu, NVIDIA_DRIVER.exists()):
            _refuse(config, report, reason)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """A whole module skipped at import (pytest.skip(allow_module_level=True), importorskip)."""
    report = yield
    config = collector.config
    if report.skipped and config.stash[_STRICT]:
        reason = skip_reason(report)
        if not allowed_skip(reason, False, NVIDIA_DRIVER.exists()):
            _refuse(config, report, reason)
    return report


def _said(reason: str, marked_gpu: bool) -> str:
    """The reason, and why CI accepts it when only the `gpu` mark makes it acceptable."""
    if marked_gpu and not any(a in reason for a in ALLOWED_SKIP_REASONS):
        return f"{reason} (a gpu test)"
    return reason


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    config = terminalreporter.config
    rows = sorted(
        [
            (r.nodeid, "skipped", _said(skip_reason(r), "gpu" in r.keywords))
            for r in terminalreporter.stats.get("skipped", [])
            if not hasattr(r, "wasxfail")
        ]
        + [(nodeid, "FAILED", reason) for nodeid, reason in config.stash.get(_REFUSED, [])]
    )
    if not rows:
        return
    strict = config.stash.get(_STRICT, False)
    terminalreporter.write_sep("=", "skips and their reasons" + (" (CI=true)" if strict else ""))
    width = max(len(nodeid) for nodeid, _, _ in rows)
    for nodeid, outcome, reason in rows:
        terminalreporter.write_line(f"{nodeid:<{width}}  {outcome:<7}  {reason}")
