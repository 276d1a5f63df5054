"""Recorded hosts: `--record DIR` writes what the probes read, `--from DIR` judges it offline
with every option; the test fixtures are such records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from builder.cli import main
from builder.facts.driver_version import DriverVersion
from builder.host import parsers
from builder.preflight.fleet import FleetInputs, preflight_host
from builder.preflight.hostio import ReadOnlyHost
from builder.preflight.inventory import Target
from builder.preflight.model import UpgradePlan
from builder.preflight.record import Record, ReplayHost
from tests.preflight.conftest import PREFLIGHT_MATRIX, TODAY
from tests.preflight.fakehost import FIXTURES, FakeHost, Fixture


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    code = main(["preflight", "--matrix", str(PREFLIGHT_MATRIX), "--json", *args])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out else {}), err


def verdicts(doc: dict[str, Any]) -> list[dict[str, str]]:
    hosts = doc["hosts"]
    assert isinstance(hosts, list)
    return [{c["id"]: c["severity"] for c in h["checks"] if c["id"] != "host.reach"} for h in hosts]


def test_this_machine_recorded_then_judged_from_the_record(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, live, _ = cli(capsys, "--record", str(tmp_path / "rec"), "--no-images")
    record = tmp_path / "rec" / "local"
    assert (record / "fixture.yaml").is_file() and (
        record / "files" / "etc" / "os-release"
    ).is_file()
    assert not list((tmp_path / "rec").glob(".*"))  # no temporary directory left behind
    again, replayed, _ = cli(capsys, "--from", str(record), "--no-images")
    assert again == code and verdicts(replayed) == verdicts(live)
    # the record is a fleet of one when its parent is given
    fleet, doc, _ = cli(capsys, "--from", str(tmp_path / "rec"), "--no-images")
    assert fleet == code and len(doc["hosts"]) == 1
    # a record is never overwritten
    code, _, err = cli(capsys, "--record", str(tmp_path / "rec"), "--no-images")
    assert code == 2 and "exists" in err


def test_a_fixture_is_a_record_judged_with_every_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, doc, _ = cli(
        capsys, "--from", str(FIXTURES / "el9-geforce"), "--target-driver", "565.57.01"
    )
    assert code == 4  # the cu128 images are broken on 550 too: 565 breaks nothing
    (host,) = doc["hosts"]
    impact = next(c for c in host["checks"] if c["id"] == "images.impact")
    assert impact["severity"] == "block"
    code, doc, _ = cli(
        capsys, "--from", str(FIXTURES / "el9-geforce"), "--target-driver", "570.124.06"
    )
    (host,) = doc["hosts"]
    assert next(c for c in host["checks"] if c["id"] == "images.impact")["severity"] == "ok"


def test_the_fixtures_directory_is_a_recorded_fleet(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, _ = cli(capsys, "--from", str(FIXTURES), "--no-images", "--jobs", "4")
    names = [h["host"] for h in doc["hosts"]]
    assert code == 4 and "el9-h100" in names and "debian12-rpm-installed" in names
    assert all(h["reachable"] for h in doc["hosts"])


@pytest.mark.parametrize(
    "name",
    [
        "el9-h100",
        "el9-h100-reboot-pending",
        "el9-l40s-rtx5090-r565",
        "el9-b200-proprietary-no-lspci",
    ],
)
def test_recording_a_fixture_host_and_replaying_it_gives_the_same_report(
    tmp_path: Path, name: str
) -> None:
    fake = FakeHost(Fixture.load_fixture(name))
    target = Target(name, f"fake://{name}")
    ctx = FleetInputs(UpgradePlan(DriverVersion("570.124.06")), TODAY, [], [], True, 20, tmp_path)
    first = preflight_host(target, ctx, lambda _: ReadOnlyHost(fake, name))
    replay = ReplayHost(Record.load(tmp_path / name))
    ctx2 = FleetInputs(UpgradePlan(DriverVersion("570.124.06")), TODAY, [], [], True)
    second = preflight_host(target, ctx2, lambda _: ReadOnlyHost(replay, name))
    assert [c.as_json() for c in second.checks] == [c.as_json() for c in first.checks]
    assert len(replay.lines) == len(fake.lines)


def test_a_broken_record_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "fixture.yaml").write_text("probes: [1, 2]\n")
    code, _, err = cli(capsys, "--from", str(tmp_path))
    assert code == 2 and "not a preflight record" in err
    code, _, err = cli(capsys, "--from", str(tmp_path / "absent"))
    assert code == 2 and "no such record directory" in err


def test_the_sysfs_witness_is_recorded_as_files_and_read_with_bounded_probes(
    tmp_path: Path,
) -> None:
    """`cat -- PATH...` of sysfs ids is kept as those files (the layout a replay reads): the
    vendor of every device, the device and class of NVIDIA's only; a probe's output whose line
    count does not match its files is no witness (nothing is guessed)."""
    name = "el9-b200-proprietary-no-lspci"
    fake = FakeHost(Fixture.load_fixture(name))
    target = Target(name, f"fake://{name}")
    ctx = FleetInputs(UpgradePlan(None), TODAY, [], [], True, 20, tmp_path)
    preflight_host(target, ctx, lambda _: ReadOnlyHost(fake, name))
    devices = tmp_path / name / "files/sys/bus/pci/devices"
    assert (devices / "0000:18:00.0/device").read_text() == "0x2901\n"
    assert (devices / "0000:00:00.0/vendor").read_text() == "0x8086\n"
    assert not (devices / "0000:00:00.0/device").exists()  # not NVIDIA: not read further
    cats = [line for line in fake.lines if " cat -- " in line]
    assert len(cats) == 2  # the vendors, then NVIDIA's device and class ids
    paths = ["/sys/bus/pci/devices/0000:18:00.0/vendor", "/sys/bus/pci/devices/0000:2a:00.0/vendor"]
    assert parsers.sys_pci_attrs(paths, "0x10de\n") is None
    values = {
        "/d/0000:18:00.0/vendor": "0x10de", "/d/0000:18:00.0/device": "0x2901",
        "/d/0000:18:00.0/class": "0x030200", "/d/0000:05:00.0/vendor": "0x10de",
        "/d/0000:05:00.0/device": "0x22a3", "/d/0000:05:00.0/class": "0x068000",
        "/d/0000:41:00.0/vendor": "0x10de", "/d/0000:41:00.0/device": "zz",
        "/d/0000:41:00.0/class": "0x030000",
    }  # fmt: skip
    (gpu,) = parsers.sys_pci_gpus("/d", values)
    assert (gpu.bus, gpu.device, gpu.pci_class) == ("0000:18:00.0", 0x2901, 0x030200)
    listed = parsers.sys_pci_listing("0000:18:00.0\n../../etc\nfoo\n", "/d")
    assert listed == ["0000:18:00.0"]
