"""`host.reach`: could preflight read the host at all. It is the first finding of every host
report, made by the fleet runner (builder.preflight.fleet) from the connection, not from
HostState; registered here so every host id comes from the registry."""

from __future__ import annotations

from builder.judgement.finding import Finding
from builder.judgement.registry import check
from builder.judgement.severity import BLOCK, OK

REACH_ID = "host.reach"


@check(REACH_ID, "host", summary="the connection: reached, or why not")
def reach(spec: str | None, why: str = "", fix: str = "") -> Finding:
    """`spec` the host was reached through; None when it was not, and `why` says why (`fix`
    what to do, where it is not the connection's)."""
    if spec is not None:
        return Finding(REACH_ID, OK, f"reached through {spec}")
    return Finding(
        REACH_ID,
        BLOCK,
        why,
        fix
        or "check the host spec, the network and the credentials; the other hosts were still "
        "checked",
    )
