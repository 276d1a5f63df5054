"""Image impact of a driver change (pure): every image, judged on the current driver and on the
target, for this host's GPUs, by the one judgement (builder/judgement/image.py). This module
only lays the verdicts side by side and sums them up as the `images.impact` finding."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from builder.facts import cuda as cuda_rules
from builder.facts import gpus as gpu_rules
from builder.facts import host as host_rules
from builder.facts.driver_version import DriverVersion
from builder.facts.sources import LIBNVIDIA_CONTAINER_DSL
from builder.judgement.driver_life import LIFECYCLE_ID
from builder.judgement.finding import Finding
from builder.judgement.gpu_identity import GpuIdentity
from builder.judgement.image import ImageVerdict, judge
from builder.judgement.image_facts import DriverState
from builder.judgement.kind import NEVER_RAN, Kind, kind_of
from builder.judgement.reasons import BROKEN, NO_DRIVER, STATUS_ORDER
from builder.judgement.registry import check
from builder.judgement.severity import BLOCK, OK, SKIP, WARN, Severity, worst
from builder.preflight.images import ImageRecord


def _weight(v: ImageVerdict) -> int | None:
    """How bad a status is; None where nothing was judged (cpu, no driver)."""
    return STATUS_ORDER.index(v.status) if v.status in STATUS_ORDER else None


@dataclass(frozen=True)
class Row:
    image: ImageRecord
    now: ImageVerdict
    after: ImageVerdict | None  # None without --target-driver

    @property
    def change(self) -> str:
        if self.after is None:
            return ""
        a, b = _weight(self.now), _weight(self.after)
        if b is None:
            return "-"
        if a is None:
            return "new"  # no driver runs now: a fresh install
        if b > a:
            return "breaks" if self.after.status == BROKEN else "degrades"
        if b < a:
            return "starts working" if self.now.status == BROKEN else "improves"
        return "unchanged"

    @property
    def kind(self) -> Kind:
        """The row's kind (builder/judgement/kind.py): never-ran when the image does not run
        here now (or there is no driver now) and will not after the plan; breaks when it runs
        now and will not."""
        now = _severity(self.now) if _weight(self.now) is not None else None
        after = _severity(self.after) if self.after is not None else None
        return kind_of(now, after, planned=self.after is not None, image=True)

    def blocking_codes(self) -> list[str]:
        """The reason codes of what stops the image (after the plan, else now); of an image
        that never ran, those that stop it now and after when there are any (what the plan
        adds is the plan's, said by the host checks)."""
        after = _blocks(self.shown)
        if self.after is None or self.kind != NEVER_RAN:
            return after
        both = [c for c in after if c in _blocks(self.now)]
        return both or after

    @property
    def shown(self) -> ImageVerdict:
        """The verdict that decides: after the change when one is planned, else now."""
        return self.after if self.after is not None else self.now

    def as_json(self) -> dict[str, Any]:
        return {
            **self.image.as_json(),
            "now": self.now.as_json(),
            "after": self.after.as_json() if self.after else None,
            "change": self.change,
            "kind": str(self.kind) if self.image.gpu else None,
        }


def impact(
    images: list[ImageRecord],
    gpus: tuple[GpuIdentity, ...],
    now: DriverState | None,
    after: DriverState | None,
    today: dt.date | None = None,
) -> list[Row]:
    """Every image on the driver now and, when one is planned, after the change."""
    return [
        Row(
            img,
            judge(img.facts, now, gpus, today),
            judge(img.facts, after, gpus, today) if after is not None else None,
        )
        for img in images
    ]


IMPACT_SOURCES = (
    LIBNVIDIA_CONTAINER_DSL,
    cuda_rules.FORWARD_COMPAT_SOURCE,
    cuda_rules.MVC_SOURCE,
    gpu_rules.SASS_COMPAT_SOURCE,
    host_rules.CDI_NO_REQUIRE_SOURCE,
)


IMPACT_ID = "images.impact"


def image_severity(v: ImageVerdict) -> int:
    """What a verdict weighs for the host: its image findings (the branch's lifecycle is
    driver.version's and driver.target's to report)."""
    return _severity(v).rank


def _blocks(v: ImageVerdict) -> list[str]:
    return [f.code for f in v.findings if f.id != LIFECYCLE_ID and f.severity is BLOCK]


def _severity(v: ImageVerdict) -> Severity:
    return worst(f.severity for f in v.findings if f.id != LIFECYCLE_ID)


@check(IMPACT_ID, "image", summary="every image on the current and the target driver")
def impact_check(rows: list[Row], target: DriverVersion | None, notes: list[str]) -> Finding:
    cid = IMPACT_ID
    judged = [r for r in rows if r.image.gpu]
    tail = f" ({'; '.join(notes)})" if notes else ""
    if not judged:
        return Finding(
            cid, SKIP, f"no GPU image to judge (matrix, lock and local){tail}", "", IMPACT_SOURCES
        )
    verdicts = [r.shown for r in judged]
    if all(v.status == NO_DRIVER for v in verdicts):
        return Finding(
            cid,
            SKIP,
            f"{len(judged)} GPU images; no driver to judge them against "
            "(pass --target-driver to judge a planned install)" + tail,
            "",
            IMPACT_SOURCES,
        )
    when = f"with {target}" if target is not None else "on the current driver"
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.status] = counts.get(v.status, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    breaks = [r for r in judged if r.change == "breaks"]
    finding = f"{len(judged)} GPU images {when}: {summary}"
    if breaks:
        finding += f"; {len(breaks)} work now and break (e.g. {breaks[0].image.name})"
    worst_row = max(judged, key=lambda r: (image_severity(r.shown), _weight(r.shown) or 0))
    rank = image_severity(worst_row.shown)
    top = next(
        (f for f in worst_row.shown.findings if f.id != LIFECYCLE_ID and f.severity.rank == rank),
        None,
    )
    if top is None or rank <= OK.rank:
        return Finding(cid, OK, finding + tail, "", IMPACT_SOURCES)
    text = f"{worst_row.image.name}: {top.message}; {finding}{tail}"
    severity = BLOCK if rank >= BLOCK.rank else WARN
    return Finding(cid, severity, text, top.remediation, IMPACT_SOURCES, reason=top.reason)
