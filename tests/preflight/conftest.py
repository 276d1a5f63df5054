"""Shared helpers: run preflight against a fixture host (in memory) with the matrix's images."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import pytest

from builder.facts.driver_version import DriverVersion
from builder.judgement.finding import Finding
from builder.preflight import images as img
from builder.preflight.fleet import FleetInputs, preflight_host
from builder.preflight.hostio import ReadOnlyHost
from builder.preflight.inventory import Target
from builder.preflight.model import UpgradePlan
from builder.preflight.report import HostReport
from builder.workspace import open_workspace
from tests.preflight.fakehost import FakeHost, Fixture

REPO = Path(__file__).resolve().parents[2]
# The cu128-line matrix the host fixtures were recorded against (matrix_cu128/README.md).
PREFLIGHT_MATRIX = Path(__file__).resolve().parent / "matrix_cu128" / "matrix.yaml"
TODAY = dt.date(2026, 11, 29)  # the day the fixtures were judged; EOL checks depend on it

RunFixture = Callable[..., tuple[HostReport, FakeHost]]


@pytest.fixture(scope="session")
def matrix_images() -> list[img.ImageRecord]:
    return img.from_workspace(open_workspace(PREFLIGHT_MATRIX, strict=False))


def context(
    images: list[img.ImageRecord],
    target: str | None = None,
    module: str | None = None,
    local: bool = True,
) -> FleetInputs:
    plan = UpgradePlan(DriverVersion(target) if target else None, module)
    return FleetInputs(plan, TODAY, images, [], local)


@pytest.fixture
def run_fixture(matrix_images: list[img.ImageRecord]) -> RunFixture:
    def run(
        name: str, target: str | None = None, module: str | None = None
    ) -> tuple[HostReport, FakeHost]:
        fake = FakeHost(Fixture.load_fixture(name))
        ctx = context(matrix_images, target, module)
        report = preflight_host(
            Target(name, f"fake://{name}"), ctx, lambda _: ReadOnlyHost(fake, name)
        )
        return report, fake

    return run


def check(report: HostReport, cid: str) -> Finding:
    found = [c for c in report.checks if c.id == cid]
    assert len(found) == 1, f"{cid}: {[c.id for c in report.checks]}"
    return found[0]


def severities(report: HostReport) -> dict[str, str]:
    return {c.id: str(c.severity) for c in report.checks}
