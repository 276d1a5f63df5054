"""A CDI spec newer than the host's podman parses blocks `cdi.spec` (nvidia-container-toolkit
1.19.1 writes CDI 0.7.0 with `additionalGids`; podman before 5.1 vendors a CDI library that
refuses it: NVIDIA/nvidia-container-toolkit#1860, #1940). The hosts are the el9-h100 record
(podman 5.2.2, a CDI 0.5.0 spec) with its podman version and its spec edited in the test."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from packaging.version import Version

from builder.cli import main
from builder.facts import cdi_versions as cdiv
from builder.host import parsers
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


# dockerd's and containerd's `--version` lines as their release builds print them
# (moby cmd/dockerd/cobra.go "Docker version {{.Version}}" with ", build <commit>";
# containerd cmd/containerd/command/main.go: name, package, version, revision)
DOCKERD = "Docker version {v}, build 8b79278\n"
CONTAINERD_IO = "containerd containerd.io {v} 7c3aca7a610df76212171d200ca3811ff6096eb8\n"
CONTAINERD_V2 = "containerd github.com/containerd/containerd/v2 v{v} 207ad711eabd375a01713109a8a1\n"


def with_engines(base: Path, dockerd: str | None, containerd: str | None) -> Path:
    """The record with recorded `dockerd --version` / `containerd --version` outputs."""
    record = base / "fixture.yaml"
    meta = yaml.safe_load(record.read_text())
    for key, out in (("dockerd", dockerd), ("containerd", containerd)):
        if out is not None:
            meta["probes"][key] = {"stdout": out, "rc": 0, "origin": "test: release-build format"}
    record.write_text(yaml.safe_dump(meta, sort_keys=False))
    return base


def test_docker_and_containerd_are_judged_against_the_spec_like_podman(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """podman 5.2.2 parses a 0.7.0 spec with additionalGids; dockerd 26.0.0 (CDI library
    v0.6.2) and containerd 1.7.13 (v0.6.2) do not, so the spec blocks naming each, with the
    first release that parses it; dockerd 27.5.1 and containerd 2.0.0 parse it."""
    old = with_engines(host(tmp_path, "5.2.2", "0.7.0", gids=True),
                       DOCKERD.format(v="26.0.0"), CONTAINERD_IO.format(v="1.7.13"))  # fmt: skip
    found = cdi_finding(capsys, old)
    assert found["severity"] == "block", found
    assert "docker 26.0.0 parses CDI specs up to 0.6.0 (its CDI library v0.6.2)" in found["finding"]
    assert "containerd 1.7.13 parses CDI specs up to 0.6.0" in found["finding"]
    assert "podman 5.2.2 parses" not in found["finding"]
    fix = found["remediation"]
    assert "upgrade docker to >= 26.1.0" in fix and "upgrade containerd to >= 1.7.16" in fix
    assert any("moby/moby/blob/v25.0.0/vendor.mod" in s for s in found["sources"])
    new = with_engines(host(tmp_path / "new", "5.2.2", "0.7.0", gids=True),
                       DOCKERD.format(v="27.5.1"), CONTAINERD_V2.format(v="2.0.0"))  # fmt: skip
    assert "parses CDI specs up to" not in cdi_finding(capsys, new)["finding"]


def test_engine_rows_are_ordered_sourced_and_read_each_release_line() -> None:
    for engine, rows in cdiv.ENGINE_CDI.items():
        assert [r.min_version for r in rows] == sorted(r.min_version for r in rows), engine
        specs = [r.newest_spec for r in rows]
        assert specs == sorted(specs) and all(r.engine == engine for r in rows)
        assert all(r.newest_spec in cdiv.KNOWN_SPEC_VERSIONS and r.sources for r in rows)
    assert cdiv.engine_newest_spec("docker", Version("24.0.9")) is None  # before CDI
    assert cdiv.engine_newest_spec("docker", Version("29.2.0")).newest_spec == Version("1.1.0")  # type: ignore[union-attr]
    assert cdiv.engine_for_spec("containerd", Version("0.8.0")).min_version == Version("1.7.27")  # type: ignore[union-attr]
    assert cdiv.engine_for_spec("podman", Version("1.1.0")) is None  # no podman read parses it
    assert parsers.dockerd_version(DOCKERD.format(v="28.2.0")) == "28.2.0"
    assert parsers.dockerd_version("podman version 4.9.4\n") is None  # podman-docker's docker
    assert parsers.containerd_version(CONTAINERD_V2.format(v="2.0.5")) == "2.0.5"
    assert parsers.containerd_version(CONTAINERD_IO.format(v="1.7.25")) == "1.7.25"


# recorded on this project's Debian 12 machine (2026-12-04): both predate CDI, so neither is
# judged against a spec
DEBIAN12_DOCKERD = "Docker version 20.10.24+dfsg1, build 5d6db84\n"
DEBIAN12_CONTAINERD = (
    "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3\n"
)


def test_the_upgrade_s_0_7_0_spec_is_a_risk_for_containerd_and_pre_cdi_engines_are_not_judged(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """toolkit 1.19.1 regenerates the spec as CDI 0.7.0 at the upgrade: a risk on a host whose
    containerd 1.7.0 parses up to 0.5.0 though podman 5.2.2 parses it; Debian 12's dockerd
    20.10 and containerd 1.6 have no CDI at all and change nothing."""
    base = with_engines(host(tmp_path, "5.2.2", "0.5.0", gids=False),
                        None, CONTAINERD_V2.format(v="1.7.0"))  # fmt: skip
    (base / "out/nvidia-ctk.txt").write_text("NVIDIA Container Toolkit CLI version 1.19.1\n")
    main(["preflight", "--from", str(base), "--no-images", "--json", "--today", "2026-11-29",
          "--target-driver", "570.124.06"])  # fmt: skip
    (report,) = json.loads(capsys.readouterr().out)["hosts"]
    found = next(c for c in report["checks"] if c["id"] == "cdi.spec")
    assert found["severity"] == "warn", found
    assert "containerd 1.7.0 parses CDI up to 0.5.0" in found["finding"]
    assert "upgrade containerd to >= 1.7.16" in found["remediation"]
    debian = with_engines(host(tmp_path / "deb", "5.2.2", "0.7.0", gids=True),
                          DEBIAN12_DOCKERD, DEBIAN12_CONTAINERD)  # fmt: skip
    assert parsers.dockerd_version(DEBIAN12_DOCKERD) == "20.10.24"
    assert parsers.containerd_version(DEBIAN12_CONTAINERD) == "1.6.20"
    assert "parses CDI specs up to" not in cdi_finding(capsys, debian)["finding"]
