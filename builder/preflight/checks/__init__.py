"""The host checks (pure): HostState + the upgrade plan -> one Finding per registered id.

Each check is registered once, with `@check(id, "host", reads=(gather steps...))`, in the
module of its domain; the report's order is the modules' order below, then each module's
definition order. A check is `fn(cid, state, plan, today) -> Finding`: it is handed its
registered id, so the id is written only in `@check`. Every number a check compares against
lives in builder.facts; the checks only apply it. docs/preflight.md lists the ids in report
order (tests/preflight/test_registry.py holds it to the registry).
"""

from __future__ import annotations

import datetime as dt
import importlib
import os
from collections.abc import Callable
from typing import cast

from builder.judgement.finding import Finding
from builder.judgement.registry import Registered, registered
from builder.judgement.severity import WARN
from builder.preflight.checks.reach import REACH_ID
from builder.preflight.host_state import HostState
from builder.preflight.impact import IMPACT_ID
from builder.preflight.model import UpgradePlan

# The report order: host.reach (made by the fleet runner), then HostState's checks by domain.
# Imported in this order by name (import statements would be sorted, and the order lost).
_DOMAINS = (
    "reach",
    "os_kernel",
    "driver",
    "gpu",
    "services",
    "container",
    "processes",
    "disk",
    "admin",
    "repos",
)
for _module in _DOMAINS:
    importlib.import_module(f"{__name__}.{_module}")

HostCheck = Callable[[str, HostState, UpgradePlan, dt.date], Finding]

# The checks that judge HostState, in report order (host.reach is judged from the connection).
HOST_CHECKS: tuple[Registered, ...] = tuple(r for r in registered("host") if r.id != REACH_ID)

# Every id a host report can carry, in its order: reachability, the checks, the image impact.
CHECK_IDS: tuple[str, ...] = (REACH_ID, *(r.id for r in HOST_CHECKS), IMPACT_ID)

# The gather steps (builder.preflight.gather.STEPS) whose data each check reads: an exception
# in one of them is named in the check's finding.
STEP_OF: dict[str, tuple[str, ...]] = {r.id: r.reads for r in HOST_CHECKS}


def run_one(
    registration: Registered, state: HostState, plan: UpgradePlan, today: dt.date
) -> Finding:
    """One check, isolated: its own exception, or one in the probes it reads, becomes its own
    finding (a warning: nothing could be judged) and never the host's (TRAINIMG_DEBUG=1 raises
    it instead)."""
    cid = registration.id
    failed = [
        f"{step}: {state.errors[step]}" for step in registration.reads if step in state.errors
    ]
    try:
        result = cast(HostCheck, registration.fn)(cid, state, plan, today)
    except Exception as exc:
        if os.environ.get("TRAINIMG_DEBUG"):
            raise
        return Finding(
            cid,
            WARN,
            f"this check failed on what the host returned: {type(exc).__name__}: {exc}"
            + (f" (probes that failed: {'; '.join(failed)})" if failed else ""),
            "inspect that input by hand; please report it (TRAINIMG_DEBUG=1 shows the traceback)",
        )
    if not failed:
        return result
    severity = result.severity if result.severity.rank >= WARN.rank else WARN
    return Finding(
        cid,
        severity,
        f"{result.message} (incomplete: reading the host failed in {'; '.join(failed)})",
        result.remediation or "inspect that input by hand; please report it",
        result.sources,
    )


def run_checks(state: HostState, plan: UpgradePlan, today: dt.date) -> list[Finding]:
    return [run_one(r, state, plan, today) for r in HOST_CHECKS]
