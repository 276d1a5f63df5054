"""A CDI spec newer than the host's podman parses blocks `cdi.spec` (nvidia-container-toolkit
1.19.1 writes CDI 0.7.0 with `additionalGids`; podman before 5.1 vendors a CDI library that
refuses it: NVIDIA/nvidia-container-toolkit#1860, #1940). The hosts are the el9-h100 record
(podman 5.2.2, a CDI 0.5.0 spec) with its podman version and its spec edited in the test."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from packaging.version import Version

from builder.cli import main
from builder.facts import cdi_versions as cdiv
from tests.preflight.fakehost import FIXTURES

SPEC = Path("files/var/run/cdi/nvidia.yaml")


def host(tmp_path: Path, podman: str, version: str, gids: bool) -> Path:
    base = tmp_path / f"h-{podman}-{version}-{gids}"
    shutil.copytree(FIXTURES / "el9-h100", base)
    record = base / "fixture.yaml"
    record.write_text(
        record.read_text().replace("podman version 5.2.2", f"podman version {podman}")
    )
    spec = base / SPEC
    text = spec.read_text().replace("cdiVersion: 0.5.0", f"cdiVersion: {version}")
    if gids:
        text = text.replace(
            "- containerEdits: &id001\n", "- containerEdits: &id001\n    additionalGids: [44]\n"
        )
    spec.write_text(text)
    return base


def cdi_finding(capsys: pytest.CaptureFixture[str], base: Path) -> dict[str, str]:
    main(["preflight", "--from", str(base), "--no-images", "--json", "--today", "2026-11-29"])
    (report,) = json.loads(capsys.readouterr().out)["hosts"]
    found: dict[str, str] = next(c for c in report["checks"] if c["id"] == "cdi.spec")
    return found


def test_a_0_7_0_spec_with_additional_gids_blocks_on_podman_4_9(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    found = cdi_finding(capsys, host(tmp_path, "4.9.3", "0.7.0", gids=True))
    assert found["severity"] == "block", found
    assert "is CDI 0.7.0" in found["finding"] and "additionalGids (CDI 0.7.0)" in found["finding"]
    assert "podman 4.9.3 parses CDI specs up to 0.6.0" in found["finding"]
    assert "upgrade podman to >= 5.1.0" in found["remediation"]
    fix = found["remediation"]
    assert cdiv.TOOLKIT_NO_GIDS_ENV in fix or cdiv.TOOLKIT_NO_GIDS_FLAG in fix


def test_the_same_spec_parses_on_podman_5_2_and_an_old_spec_on_4_9(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    new_podman = cdi_finding(capsys, host(tmp_path, "5.2.2", "0.7.0", gids=True))
    assert "parses CDI specs up to" not in new_podman["finding"]
    old_spec = cdi_finding(capsys, host(tmp_path, "4.9.3", "0.5.0", gids=False))
    assert "parses CDI specs up to" not in old_spec["finding"], old_spec


def test_a_spec_older_than_its_fields_and_an_unreleased_version_block(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    older = cdi_finding(capsys, host(tmp_path, "5.2.2", "0.6.0", gids=True))
    assert older["severity"] == "block" and "uses additionalGids (CDI 0.7.0)" in older["finding"]
    bogus = cdi_finding(capsys, host(tmp_path, "5.2.2", "0.9.9", gids=False))
    assert bogus["severity"] == "block" and "no released CDI spec version" in bogus["finding"]


def test_the_podman_rows_are_ordered_and_name_their_sources() -> None:
    rows = cdiv.PODMAN_CDI
    assert [r.min_version for r in rows] == sorted(r.min_version for r in rows)
    assert cdiv.podman_newest_spec(Version("4.3.1")).newest_spec == Version("0.5.0")  # type: ignore[union-attr]
    assert cdiv.podman_for_spec(Version("0.7.0")).min_version == Version("5.1.0")  # type: ignore[union-attr]
    assert all(r.sources for r in rows)
