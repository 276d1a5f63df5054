"""Host check of what holds the GPUs now (pure): compute processes the driver unload kills."""

from __future__ import annotations

import datetime as dt

from builder.facts import host as host_rules
from builder.judgement.finding import Finding
from builder.judgement.registry import check
from builder.judgement.severity import OK, SKIP, WARN
from builder.preflight.host_state import HostState
from builder.preflight.model import UpgradePlan


@check("gpu.processes", "host", reads=("driver",))
def gpu_processes(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Which compute processes hold the GPUs now (the driver unload kills them)?"""
    srcs = (host_rules.GPU_PROCESSES_SOURCE,)
    if not any(g.source == "nvml" for g in state.gpus):
        return Finding(cid, SKIP, "NVML lists no GPU, so no process can hold one", "", srcs)
    if state.apps is None:
        out = state.out("smi-apps")
        return Finding(
            cid, WARN, f"cannot list GPU processes ({out.why() if out else 'not asked'})", "", srcs
        )
    if not state.apps:
        return Finding(cid, OK, "no compute process uses the GPUs", "", srcs)
    listed = ", ".join(f"{a.pid} {a.name} ({a.memory})" for a in state.apps[:5])
    more = f" and {len(state.apps) - 5} more" if len(state.apps) > 5 else ""
    return Finding(
        cid,
        WARN,
        f"{len(state.apps)} process(es) use the GPUs now: {listed}{more}; the "
        "upgrade unloads the module and they die (or block the unload)",
        "drain the host: stop the jobs and containers first",
        srcs,
    )
