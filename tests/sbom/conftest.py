"""The default cell's recorded image (tests/data/sbom/, origins noted there) and its SBOM, made
once for the session: the schema validation in sbom_json costs ~1.8 CPU-s a call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from builder.build.lock import BuildRecord
from builder.sbom import cyclonedx

DATA = Path(__file__).resolve().parents[1] / "data" / "sbom"
CELL = "debian12-cpu-py3.11-torch2.13.0-runtime"  # matrix.yaml's project.default_cell


@pytest.fixture(scope="session")
def record() -> BuildRecord:
    return BuildRecord.from_json(json.loads((DATA / "cpu_record.json").read_text())["record"])


@pytest.fixture(scope="session")
def inventory() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / "cpu_inventory.json").read_text())
    return data


@pytest.fixture(scope="session")
def text(record: BuildRecord, inventory: dict[str, Any]) -> str:
    """The default cell's SBOM, validated against the CycloneDX schema."""
    return cyclonedx.sbom_json(
        cyclonedx.build_bom(f"localhost/trainimg:{CELL}", record, inventory, cell=CELL)
    )
