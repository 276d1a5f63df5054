"""Host check of free disk space for the DKMS build and the new initramfs (pure)."""

from __future__ import annotations

import datetime as dt

from builder.facts import host as host_rules
from builder.judgement.finding import Finding
from builder.judgement.registry import check
from builder.judgement.severity import OK, SKIP, WARN
from builder.preflight.host_state import HostState
from builder.preflight.model import UpgradePlan


@check("disk.free", "host", reads=("disk",))
def disk_free(cid: str, state: HostState, plan: UpgradePlan, today: dt.date) -> Finding:
    """Is there room for the DKMS build and the new initramfs?"""
    srcs = (host_rules.FREE_DISK_SOURCE,)
    if not state.disk:
        return Finding(cid, SKIP, "df gave nothing to judge", "", srcs)
    low, parts = [], []
    for d in state.disk:
        need = host_rules.FREE_MB.get(d.path, 0)
        mb = d.avail_kb // 1024
        parts.append(f"{d.path} ({d.mount}) {mb} MB free")
        if mb < need:
            low.append(f"{d.path} has {mb} MB free, needs {need} MB")
    if low:
        return Finding(
            cid,
            WARN,
            "; ".join(low),
            "free space before the DKMS build and the new initramfs",
            srcs,
        )
    return Finding(cid, OK, "; ".join(parts), "", srcs)
