"""NVIDIA driver branch facts: kernel-module flavours and branch lifecycles."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from builder.rules.sources import DATACENTER_DRIVER_LIFECYCLE, DRIVER_INSTALL_GUIDE, Source

# From R560 the open kernel modules are the default install; the 620 release notes say
# "Proprietary Kernel Modules Removed" (DRIVER_INSTALL_GUIDE).
OPEN_DEFAULT_FROM_BRANCH = 560
PROPRIETARY_REMOVED_FROM_BRANCH = 620
MODULE_SOURCE = DRIVER_INSTALL_GUIDE

# Open modules need a GSP: Turing (7.5) and newer (OPEN_MODULES_BLOG in builder/rules/sources.py).
OPEN_MODULES_MIN_CC = (7, 5)

KERNEL_MODULES = ("open", "proprietary")


@dataclass(frozen=True)
class BranchLifecycle:
    branch: int
    kind: str  # LTSB, PB (production), NFB (new feature)
    eol: dt.date | None
    source: Source


# Data center driver branch lifecycle as listed in the 615/620 release notes
# (https://docs.nvidia.com/datacenter/tesla/drivers/).
# R570 is no longer listed, so its end of life is not known.
BRANCH_LIFECYCLE: dict[int, BranchLifecycle] = {
    b.branch: b
    for b in (
        BranchLifecycle(535, "LTSB", dt.date(2026, 6, 30), DATACENTER_DRIVER_LIFECYCLE),
        BranchLifecycle(570, "PB", None, Source(DATACENTER_DRIVER_LIFECYCLE.ref, False)),
        BranchLifecycle(580, "LTSB", dt.date(2028, 6, 30), DATACENTER_DRIVER_LIFECYCLE),
        BranchLifecycle(595, "PB", dt.date(2027, 3, 31), DATACENTER_DRIVER_LIFECYCLE),
        BranchLifecycle(610, "NFB", dt.date(2026, 8, 31), DATACENTER_DRIVER_LIFECYCLE),
        BranchLifecycle(620, "LTSB", dt.date(2029, 9, 30), DATACENTER_DRIVER_LIFECYCLE),
    )
}
