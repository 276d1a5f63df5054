"""The quick run's smaller example counts (docs/testing.md). `scripts/test.sh --quick` sets
TRAINIMG_TEST_QUICK=1; every other run (CI, a plain `pytest`) keeps the full counts, so what the
edit-test loop samples lightly the full run still tries in earnest."""

from __future__ import annotations

import os

QUICK_ENV = "TRAINIMG_TEST_QUICK"
QUICK = os.environ.get(QUICK_ENV) == "1"
# hypothesis' examples per @given test in the quick run (its default, kept by the full run: 100)
QUICK_HYPOTHESIS_EXAMPLES = 20


def examples(full: int, quick: int) -> int:
    """How many generated cases a test tries: `full`, or `quick` in the quick run."""
    return quick if QUICK else full


def load_hypothesis_profile() -> None:
    """In the quick run, hypothesis tries QUICK_HYPOTHESIS_EXAMPLES per test (a test's own
    @settings(max_examples=...) should go through examples() to follow it), and does not time
    its input generation (on 2 shared cores the too_slow health check fails a test for the load,
    not for the test)."""
    if not QUICK:
        return
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        "quick",
        max_examples=QUICK_HYPOTHESIS_EXAMPLES,
        suppress_health_check=[HealthCheck.too_slow],
    )
    settings.load_profile("quick")
