"""SOURCE_DATE_EPOCH of a build: one date, taken from the build's inputs, never from the clock
(the reproducible-builds.org convention), so a cold rebuild of the same inputs is the same image.

The date is the base image's own: the newest apt Release date a trainimg base was made from
(label io.trainimg.base.lists-date), else the base's creation time (a registry base pinned by
digest carries a fixed one), else 0. The base's id is part of the build hash, so the date is
fixed by what the lock records. It goes to two places: libpod's build `timestamp` (the image's
and its history's creation times, and every file's mtime in the committed layers), and the
SOURCE_DATE_EPOCH build argument the Containerfile declares, under which pip writes checked-hash
.pyc files (no install time inside) and useradd dates /etc/shadow. Pure: no I/O.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping

from builder.spec.labels import BASE_LISTS_DATE_LABEL

BUILD_ARG = "SOURCE_DATE_EPOCH"


def epoch_seconds(text: str) -> int | None:
    """Seconds since the epoch of an ISO 8601 time (UTC where it names no zone); None: not one."""
    try:
        when = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return max(0, int(when.timestamp()))


def source_date_epoch(base_labels: Mapping[str, str], base_created: str = "") -> int:
    """Seconds since the epoch for a build on a base with these labels and creation time."""
    for text in (base_labels.get(BASE_LISTS_DATE_LABEL, ""), base_created):
        # libpod reports nanoseconds (2026-12-01T10:00:00.123456789Z): seconds are enough
        seconds = epoch_seconds(re.sub(r"\.\d+", "", text)) if text else None
        if seconds is not None:
            return seconds
    return 0
