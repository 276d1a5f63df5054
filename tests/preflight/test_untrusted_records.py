"""Records are untrusted input: a hostile record is exit 2 with one line and
nothing it names read; `--record` keeps only what preflight parses; a probe that would write
(podman's store where podman never ran) is skipped; ssh probes share one connection."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from builder.cli import main
from builder.facts.driver_version import DriverVersion
from builder.host.parsers import cdi_spec, safe_load_yaml
from builder.host.parsers.safe_yaml import YamlTooLarge
from builder.preflight.fleet import FleetInputs, preflight_host
from builder.preflight.hostio import Output, ReadOnlyHost, connect_validated
from builder.preflight.inventory import Connection, Target
from builder.preflight.model import UpgradePlan
from builder.preflight.record import Record
from tests.preflight.conftest import PREFLIGHT_MATRIX, TODAY
from tests.preflight.fakehost import FIXTURES, FakeHost, Fixture

HOSTILE = FIXTURES / "hostile"


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["preflight", "--matrix", str(PREFLIGHT_MATRIX), *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every path opened through pathlib while the test runs."""
    seen: list[str] = []
    real_open = pathlib.Path.open

    def spy(self: Path, *args: Any, **kwargs: Any) -> Any:
        seen.append(str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "open", spy)
    return seen


@pytest.mark.parametrize(
    ("record", "says"),
    [
        ("traversal", "file ../../../../etc/shadow is not a path inside the record"),
        ("symlink-out", "files/etc/os-release is a symlink (refused"),
        ("dev-zero", "file /dev/zero is not a path inside the record"),
        ("alias-bomb", "expands to more than 200000 nodes (YAML aliases): refused"),
    ],
)
def test_a_hostile_record_is_exit_2_with_one_line_and_nothing_read(
    capsys: pytest.CaptureFixture[str], opened: list[str], record: str, says: str
) -> None:
    code, out, err = cli(capsys, "--from", str(HOSTILE / record))
    assert code == 2 and out == "" and says in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    # only the record file itself was opened: nothing it points at
    root = str((HOSTILE / record).resolve())
    assert all(p == f"{root}/fixture.yaml" for p in opened), opened
    assert "root:" not in err  # no line of /etc/passwd or /etc/shadow


def test_a_probe_file_that_is_a_symlink_or_a_fifo_is_refused(tmp_path: Path) -> None:
    base = tmp_path / "rec"
    shutil.copytree(FIXTURES / "el9-h100", base)
    out = base / "out" / "dkms.txt"
    out.unlink()
    out.symlink_to("/etc/passwd")
    with pytest.raises(Exception, match=r"out/dkms\.txt is a symlink"):
        Record.load(base)
    out.unlink()
    os.mkfifo(out)
    assert stat.S_ISFIFO(out.lstat().st_mode)
    with pytest.raises(Exception, match=r"out/dkms\.txt is not a regular file"):
        Record.load(base)  # a FIFO would block the reader forever


def test_a_cdi_spec_alias_bomb_is_a_finding_not_a_312_mb_report(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bomb = (HOSTILE / "alias-bomb" / "fixture.yaml").read_text()
    with pytest.raises(YamlTooLarge):
        safe_load_yaml(bomb)
    assert isinstance(cdi_spec("/etc/cdi/nvidia.yaml", bomb), str)  # an error, not a spec
    base = tmp_path / "el9-h100"
    shutil.copytree(FIXTURES / "el9-h100", base)
    spec = base / "files" / "var" / "run" / "cdi" / "nvidia.yaml"
    spec.write_text("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n" + bomb.split("probes:")[0]
                    + "devices: [{name: all, containerEdits: {env: *h}}]\n")  # fmt: skip
    _, out, _ = cli(capsys, "--from", str(base), "--no-images", "--json")
    assert len(out) < 200_000, len(out)
    (host,) = json.loads(out)["hosts"]
    cdi = next(c for c in host["checks"] if c["id"] == "cdi.spec")
    assert cdi["severity"] == "block" and "YAML aliases" in cdi["finding"]


def test_record_keeps_only_what_preflight_parses(tmp_path: Path) -> None:
    """dnf.conf's proxy_password, an image's secret environment and the rest of the kernel
    command line never reach a record (records are attached to tickets)."""
    fx = Fixture.load_fixture("el9-h100-xid-pinned")
    fake = FakeHost(fx)
    dnf_conf = "/etc/dnf/dnf.conf"
    real = dict(fx.files)
    conf = tmp_path / "dnf.conf"
    conf.write_text(
        "[main]\ngpgcheck=1\nproxy=http://proxy:3128\nproxy_username=svc\n"
        "proxy_password=hunter2-h21\nexclude=nvidia-driver*\n"
    )
    real[dnf_conf] = conf
    cmdline = tmp_path / "cmdline"
    cmdline.write_text("BOOT_IMAGE=/vmlinuz root=/dev/sda1 iscsi_pass=s3cr3t-h21 "
                       "modprobe.blacklist=nouveau\n")  # fmt: skip
    real["/proc/cmdline"] = cmdline
    fake.record.checked_files = real
    ctx = FleetInputs(UpgradePlan(DriverVersion("570.124.06")), TODAY, [], [], True, 20, tmp_path)
    preflight_host(Target("h", "fake://h"), ctx, lambda _: ReadOnlyHost(fake, "h"))
    written = "\n".join(p.read_text() for p in (tmp_path / "h").rglob("*") if p.is_file())
    assert "hunter2-h21" not in written and "proxy_username" not in written
    assert "s3cr3t-h21" not in written and "root=/dev/sda1" not in written
    kept = (tmp_path / "h" / "files" / "etc" / "dnf" / "dnf.conf").read_text()
    assert kept == "[main]\nexclude=nvidia-driver*\n"
    assert (
        "modprobe.blacklist=nouveau" in (tmp_path / "h" / "files" / "proc" / "cmdline").read_text()
    )
    # what was kept still judges the same: the pin is found again from the record
    replayed = Record.load(tmp_path / "h")
    assert "exclude=nvidia-driver*" in replayed.files[dnf_conf].read_text()


def test_the_image_environment_in_a_record_is_what_the_toolkit_reads() -> None:
    from builder.host.parsers import inspect_subset

    text = json.dumps([{"Id": "a" * 64, "RepoTags": ["x:1"], "Config": {
        "Env": ["AWS_SECRET_ACCESS_KEY=h21-secret", "CUDA_VERSION=12.8.1",
                "NVIDIA_REQUIRE_CUDA=cuda>=12.8", "PATH=/bin"],
        "Labels": {"io.trainimg.cell": "c", "com.example.token": "h21-token"}}}])  # fmt: skip
    kept = inspect_subset(text)
    assert "h21-secret" not in kept and "h21-token" not in kept and "PATH" not in kept
    assert "NVIDIA_REQUIRE_CUDA=cuda>=12.8" in kept and "io.trainimg.cell" in kept


def test_podman_images_is_not_asked_where_podman_never_ran() -> None:
    """`podman images` creates podman's store (and its database) where none exists: a change.
    The Debian record has podman installed but no store: images are not listed."""
    fake = FakeHost(Fixture.load_fixture("debian12-rpm-installed"))
    ctx = FleetInputs(UpgradePlan(), TODAY, [], [], True)
    report = preflight_host(Target("d", "fake://d"), ctx, lambda _: ReadOnlyHost(fake, "d"))
    asked = [line for line in fake.lines if " podman " in f" {line} "]
    assert not any("images" in line for line in asked), asked
    impact = next(c for c in report.checks if c.id == "images.impact")
    assert "podman has no image store for this user" in impact.message
    # where podman ran (the store exists), its images are listed as before
    h100 = FakeHost(Fixture.load_fixture("el9-h100"))
    preflight_host(Target("h", "fake://h"), ctx, lambda _: ReadOnlyHost(h100, "h"))
    assert any("podman images --format json" in line for line in h100.lines)


FAKE_SSH = """#!/bin/sh
# a stand-in for ssh that logs its arguments and answers `uname -r`
printf '%s\\n' "$*" >> "$FAKE_SSH_LOG"
case "$*" in
  *"uname -r"*) echo 5.14.0-503.35.1.el9_5.x86_64; exit 0 ;;
esac
echo "not recorded" >&2
exit 127
"""


def test_ssh_probes_share_one_connection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every probe of a host goes through one ssh master (ControlMaster=auto, one
    ControlPath): a host costs one connection, not one per probe."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ssh = bin_dir / "ssh"
    ssh.write_text(FAKE_SSH)
    ssh.chmod(0o755)
    log = tmp_path / "ssh.log"
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SSH_LOG", str(log))
    control = tmp_path / "ctl"
    control.mkdir(mode=0o700)
    host = connect_validated(Connection("ssh", "gpu1.example", "root"), 5, str(control))
    ctx = FleetInputs(UpgradePlan(), TODAY, [], [], False, 5, None, str(control))
    report = preflight_host(
        Target("gpu1", "ssh://root@gpu1.example", connection=None),
        ctx,
        lambda _: host,
    )
    assert report.reachable
    calls = log.read_text().splitlines()
    assert len(calls) > 20  # every probe went through ssh
    assert all(f"-o ControlPath={control}/%C" in c for c in calls), calls[0]
    assert all("ControlMaster=auto" in c and "ControlPersist=30s" in c for c in calls)


def test_output_shapes_survive_the_replay(tmp_path: Path) -> None:
    """A record written and read back is the same record (the subset keeps formats)."""
    log = [
        Output(("cat", "/etc/dnf/dnf.conf"), 0, "[main]\nexclude=kmod-nvidia*\n", ""),
        Output(("uname", "-r"), 0, "5.14.0-503.35.1.el9_5.x86_64\n", ""),
    ]
    from builder.preflight.record import write_record

    write_record(tmp_path / "r", "h", "fake://h", log, TODAY)
    rec = Record.load(tmp_path / "r")
    assert rec.files["/etc/dnf/dnf.conf"].read_text() == "[main]\nexclude=kmod-nvidia*\n"


def test_a_fleet_with_one_hostile_record_judges_the_others(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fleet = tmp_path / "fleet"
    for name in ("el9-h100", "el9-v100-r535"):
        shutil.copytree(FIXTURES / name, fleet / name)
    shutil.copytree(HOSTILE / "traversal", fleet / "zz-traversal")
    code, out, err = cli(capsys, "--from", str(fleet), "--target-driver", "580.65.06", "--jsonl")
    assert err == "" and code == 4, err  # judged: the refused host is broken now, as unreachable
    *hosts, summary = (json.loads(line) for line in out.splitlines())
    assert [h["host"] for h in hosts] == ["el9-h100", "el9-v100-r535", "zz-traversal"]
    bad = hosts[2]
    assert bad["reachable"] is False and bad["verdict"] == "block" and bad["kind"] == "broken-now"
    assert bad["top"]["reason"] == "host.reach" and "record refused" in bad["top"]["finding"]
    assert "not a path inside the record" in bad["top"]["finding"]
    assert all(h["facts"] for h in hosts[:2])  # the others were judged in full
    assert summary["summary"]["hosts"] == 3 and summary["summary"]["exit_code"] == 4
    assert sum(summary["summary"]["verdicts"].values()) == 3
    # nothing judged at all: bad input
    only = tmp_path / "only-bad"
    for name in ("traversal", "symlink-out"):
        shutil.copytree(HOSTILE / name, only / name, symlinks=True)
    code, out, err = cli(capsys, "--from", str(only))
    assert code == 2 and out == "" and "no record could be judged" in err, err
    assert len(err.strip().splitlines()) == 1
