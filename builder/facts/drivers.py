"""NVIDIA driver branch facts: kernel-module flavours, branch lifecycles, and the CUDA version
each branch supports."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from packaging.version import Version

from builder.facts.sources import DATACENTER_DRIVER_LIFECYCLE, DRIVER_INSTALL_GUIDE, Source

# From R560 the open kernel modules are the default install; the 620 release notes say
# "Proprietary Kernel Modules Removed" (DRIVER_INSTALL_GUIDE).
OPEN_DEFAULT_FROM_BRANCH = 560
PROPRIETARY_REMOVED_FROM_BRANCH = 620
MODULE_SOURCE = DRIVER_INSTALL_GUIDE

# Open modules need a GSP: Turing (7.5) and newer (OPEN_MODULES_BLOG in builder/facts/sources.py).
OPEN_MODULES_MIN_CC = (7, 5)

KERNEL_MODULES = ("open", "proprietary")


# --- lifecycle -------------------------------------------------------------------------------
@dataclass(frozen=True)
class BranchLifecycle:
    branch: int
    kind: str  # LTSB, PB (production), NFB (new feature)
    eol: dt.date | None
    source: Source


_LIFECYCLE_615 = Source(
    "https://docs.nvidia.com/datacenter/tesla/drivers/615/"
    "supported-drivers-and-cuda-toolkit-versions.html (Table 2)"
)
_LIFECYCLE_620 = Source(
    "https://docs.nvidia.com/datacenter/tesla/drivers/620/"
    "supported-drivers-and-cuda-toolkit-versions.html (Table 2)"
)
# R570's row left the table before the 615 docs; its February 2026 end of life is the earlier
# (580-era) edition of the same page, which was not read here.
_LIFECYCLE_580 = Source(
    "https://docs.nvidia.com/datacenter/tesla/drivers/580/"
    "supported-drivers-and-cuda-toolkit-versions.html",
    confirmed=False,
)

# NVIDIA's data center driver lifecycle table (month of end of life -> its last day). Only
# long-term support and production branches are listed with a date; new feature branches "are
# short-lived and do not have an end-of-life date" (620 edition, note under Table 2): a new
# feature branch without a date is supported until a newer new feature branch is listed
# (R590 ended with R610; R615 is the current one), and one with a date keeps it (R610's
# August 2026 end, 615 edition). Read 2026-12-02 (issue 28's survey of the 615 and 620 pages).
BRANCH_LIFECYCLE: dict[int, BranchLifecycle] = {
    b.branch: b
    for b in (
        BranchLifecycle(535, "LTSB", dt.date(2026, 6, 30), _LIFECYCLE_615),
        BranchLifecycle(570, "PB", dt.date(2026, 2, 28), _LIFECYCLE_580),
        BranchLifecycle(580, "LTSB", dt.date(2028, 6, 30), _LIFECYCLE_620),
        BranchLifecycle(590, "NFB", None, _LIFECYCLE_620),
        BranchLifecycle(595, "PB", dt.date(2027, 3, 31), _LIFECYCLE_620),
        BranchLifecycle(610, "NFB", dt.date(2026, 8, 31), _LIFECYCLE_615),
        BranchLifecycle(615, "NFB", None, _LIFECYCLE_620),
        BranchLifecycle(620, "LTSB", dt.date(2029, 9, 30), _LIFECYCLE_620),
    )
}
NEW_FEATURE = "NFB"
LIFECYCLE_SOURCE = DATACENTER_DRIVER_LIFECYCLE
# Warn this many days ahead of a branch's end of life (trainimg policy, as for OS lifecycles).
BRANCH_EOL_WARN_DAYS = 180


@dataclass(frozen=True)
class BranchStatus:
    branch: int
    state: str  # supported | ending | eol | unlisted | unknown
    text: str
    eol: dt.date | None
    source: Source

    @property
    def past_eol(self) -> bool:
        return self.state in ("eol", "unlisted")


def branch_status(branch: int, today: dt.date) -> BranchStatus:
    """Where a branch stands in NVIDIA's lifecycle on `today`. A branch below the newest listed
    one that the table does not list (R575, R565, R560, R550...) is out of support: NVIDIA
    lists every supported LTSB/PB branch, and a new feature branch ends when the next ships."""
    life = BRANCH_LIFECYCLE.get(branch)
    if life is not None and life.eol is None and life.kind == NEW_FEATURE:
        return _new_feature_status(life)
    if life is not None and life.eol is not None:
        left = (life.eol - today).days
        if left < 0:
            text = f"R{branch} ({life.kind}) reached end of life on {life.eol}"
            return BranchStatus(branch, "eol", text, life.eol, life.source)
        if left <= BRANCH_EOL_WARN_DAYS:
            text = f"R{branch} ({life.kind}) reaches end of life on {life.eol} ({left} days)"
            return BranchStatus(branch, "ending", text, life.eol, life.source)
        text = f"R{branch} ({life.kind}) is supported until {life.eol}"
        return BranchStatus(branch, "supported", text, life.eol, life.source)
    if branch < max(BRANCH_LIFECYCLE):
        text = (
            f"R{branch} is not in NVIDIA's driver lifecycle table: no longer supported "
            "(a past new feature branch, or a branch past its end of life)"
        )
        return BranchStatus(branch, "unlisted", text, None, _LIFECYCLE_620)
    text = f"R{branch} is newer than every branch in NVIDIA's lifecycle table the rules hold"
    return BranchStatus(branch, "unknown", text, None, _LIFECYCLE_620)


def _new_feature_status(life: BranchLifecycle) -> BranchStatus:
    """A new feature branch without a date: current until a newer new feature branch is
    listed (NVIDIA: it ends when the next ships)."""
    newer = sorted(
        b.branch
        for b in BRANCH_LIFECYCLE.values()
        if b.kind == NEW_FEATURE and b.branch > life.branch
    )
    if newer:
        text = (
            f"R{life.branch} (new feature branch) ended when R{newer[0]} shipped: no longer "
            "supported"
        )
        return BranchStatus(life.branch, "unlisted", text, None, life.source)
    text = (
        f"R{life.branch} is the current new feature branch: supported until the next one ships "
        "(NVIDIA gives new feature branches no end-of-life date)"
    )
    return BranchStatus(life.branch, "supported", text, None, life.source)


# --- the CUDA version a branch supports ------------------------------------------------------
@dataclass(frozen=True)
class BranchCuda:
    branch: int
    cuda: Version  # what the driver reports: nvidia-smi "CUDA (UMD) Version", cuDriverGetVersion
    source: Source
    minor_known: bool = True  # False: only the CUDA major is published for the branch

    @property
    def text(self) -> str:
        return str(self.cuda) if self.minor_known else f"{self.cuda.major}.x"


def _notes(version: str, confirmed: bool = True) -> Source:
    return Source(
        f"https://docs.nvidia.com/cuda/archive/{version}/cuda-toolkit-release-notes/index.html "
        "(CUDA Toolkit and Corresponding Driver Versions)",
        confirmed,
    )


def _redistrib(driver: str) -> Source:
    # not fetched from this machine (no network to NVIDIA): the values as issue 28 quotes them
    return Source(
        f"https://developer.download.nvidia.com/compute/cuda/redist/redistrib_{driver}.json "
        "(read 2026-12-02 via issue 28)",
        confirmed=False,
    )


_LIFECYCLE_620_R615 = Source(
    "https://docs.nvidia.com/datacenter/tesla/drivers/620/"
    "supported-drivers-and-cuda-toolkit-versions.html (R615 row; read 2026-12-02 via issue 28)",
    confirmed=False,
)

# The first toolkit of each CUDA minor names its driver branch in the release notes' table
# "CUDA Toolkit and Corresponding Driver Versions" (Linux x86_64); a driver of that branch
# reports that CUDA version. R565 shipped with no toolkit of its own (it reports 12.7); R590
# and R595 report 13.1 and 13.2 (public `nvidia-smi` banners of 590.48.01 and 595.71.05). From
# R610 the CUDA redistributables' manifest of each driver (`redistrib_<driver>.json`, its
# `nvidia_driver` and `cuda` entries) names the CUDA version the driver ships: 13.3 for
# 610.57.04, 13.5 for 620.70.06; R615 prints 13.4 (issue 28's survey of recorded R615 hosts).
# Never extrapolate past the last row: an unknown branch has an unknown CUDA version, and on a
# live host nvidia-smi's `CUDA UMD Version` (R610+) or `CUDA Version` is read instead.
BRANCH_CUDA: dict[int, BranchCuda] = {
    b.branch: b
    for b in (
        BranchCuda(418, Version("10.1"), _notes("10.1")),
        BranchCuda(440, Version("10.2"), _notes("10.2")),
        BranchCuda(450, Version("11.0"), _notes("11.0.3")),
        BranchCuda(455, Version("11.1"), _notes("11.1.1")),
        BranchCuda(460, Version("11.2"), _notes("11.2.2")),
        BranchCuda(465, Version("11.3"), _notes("11.3.1")),
        BranchCuda(470, Version("11.4"), _notes("11.4.4")),
        BranchCuda(495, Version("11.5"), _notes("11.5.2")),
        BranchCuda(510, Version("11.6"), _notes("11.6.0")),
        BranchCuda(515, Version("11.7"), _notes("11.7.1", False)),
        BranchCuda(520, Version("11.8"), _notes("11.8.0", False)),
        BranchCuda(525, Version("12.0"), _notes("12.0.0")),
        BranchCuda(530, Version("12.1"), _notes("12.1.1")),
        BranchCuda(535, Version("12.2"), _notes("12.2.1")),
        BranchCuda(545, Version("12.3"), _notes("12.3.0")),
        BranchCuda(550, Version("12.4"), _notes("12.4.0")),
        BranchCuda(555, Version("12.5"), _notes("12.5.1")),
        BranchCuda(560, Version("12.6"), _notes("12.6.3")),
        BranchCuda(
            565,
            Version("12.7"),
            Source("https://docs.nvidia.com/datacenter/tesla/tesla-release-notes-565/", False),
        ),
        BranchCuda(570, Version("12.8"), _notes("12.8.1")),
        BranchCuda(575, Version("12.9"), _notes("12.9.1")),
        BranchCuda(580, Version("13.0"), _notes("13.0.0")),
        BranchCuda(590, Version("13.1"), _notes("13.1.0", False)),
        BranchCuda(595, Version("13.2"), _notes("13.2.0", False)),
        BranchCuda(610, Version("13.3"), _redistrib("610.57.04")),
        BranchCuda(615, Version("13.4"), _LIFECYCLE_620_R615),
        BranchCuda(620, Version("13.5"), _redistrib("620.70.06")),
    )
}


BRANCH_CUDA_SOURCE = Source(
    "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html "
    "(CUDA Toolkit and Corresponding Driver Versions); per branch in BRANCH_CUDA"
)


def branch_cuda(branch: int) -> BranchCuda | None:
    """The entry for a branch; a branch between two rows (no toolkit of its own) reports the
    CUDA of the row below it; a branch above the last row is unknown (None)."""
    if branch in BRANCH_CUDA:
        return BRANCH_CUDA[branch]
    if branch > max(BRANCH_CUDA):
        return None
    below = [b for b in BRANCH_CUDA if b < branch]
    return BRANCH_CUDA[max(below)] if below else None


def driver_cuda_version(driver: Version) -> Version | None:
    """The CUDA version a driver reports, from its branch (None: not known to the rules; for a
    branch known to its major only, that major: see branch_cuda(...).minor_known)."""
    entry = branch_cuda(driver.major)
    return entry.cuda if entry is not None else None


# --- which GPU architectures a branch drives ---------------------------------------------------
# NVIDIA's "CUDA Toolkit, Driver, and Architecture Matrix": Maxwell, Pascal and Volta are
# supported up to R580 (their last driver branch; CUDA 12.x is their last toolkit); Kepler 3.5/3.7
# ended with R470; Turing and newer are ongoing.
ARCHITECTURE_MATRIX = Source(
    "https://docs.nvidia.com/datacenter/tesla/drivers/cuda-toolkit-driver-and-architecture-matrix.html"
)
