"""SOURCE_DATE_EPOCH comes from the base's own date, never the clock."""

from __future__ import annotations

from builder.build.source_date import source_date_epoch
from builder.spec.labels import BASE_LISTS_DATE_LABEL


def test_the_base_lists_date_wins() -> None:
    labels = {BASE_LISTS_DATE_LABEL: "2026-11-29T09:12:47Z"}
    assert source_date_epoch(labels, "2026-12-01T15:00:00.123456789Z") == 1795943567


def test_else_the_base_creation_time_without_its_fraction() -> None:
    assert source_date_epoch({}, "2026-12-01T15:00:00.123456789Z") == 1796137200
    assert source_date_epoch({}, "2026-12-01T16:00:00.5+01:00") == 1796137200


def test_else_zero() -> None:
    assert source_date_epoch({}, "") == 0
    assert source_date_epoch({BASE_LISTS_DATE_LABEL: "yesterday"}, "not a date") == 0
