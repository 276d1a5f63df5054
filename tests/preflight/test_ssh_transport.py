"""The deadlines on this side: a probe whose ssh never answers is killed at its deadline, and a
host past its per-host deadline runs no further probe; both say how far the host got."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from builder.preflight.hostio import HostUnreachable, ReadOnlyHost, connect_validated
from builder.preflight.inventory import Connection
from builder.preflight.ssh_transport import DeadlineSsh, ProbeTimeout, SshOptions

# a stand-in for an ssh whose host stopped answering: it answers `uname -r` once, then hangs
HANGING_SSH = """#!/bin/sh
for last; do :; done
case "$last" in
  *uname*) if [ ! -e "$0.answered" ]; then : > "$0.answered"; echo 6.1.0; exit 0; fi ;;
esac
exec sleep 60
"""


@pytest.fixture
def hanging_ssh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ssh = bin_dir / "ssh"
    ssh.write_text(HANGING_SSH)
    ssh.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return ssh


def test_a_probe_without_an_answer_is_killed_at_its_deadline(hanging_ssh: Path) -> None:
    backend = DeadlineSsh("gpu1.example", options=SshOptions())
    start = time.monotonic()
    with pytest.raises(ProbeTimeout, match=r"no answer within 0\.5 s"):
        backend.run("sleep-forever", timeout=0.5)
    assert time.monotonic() - start < 5


def test_a_host_that_stops_answering_is_unreachable_with_how_far_it_got(
    hanging_ssh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("builder.preflight.hostio.PROBE_GRACE_S", 0)
    host = connect_validated(Connection("ssh", "gpu1.example", "root"), 1, None, SshOptions(), 30)
    assert host.reach().stdout.strip() == "6.1.0"
    start = time.monotonic()
    with pytest.raises(HostUnreachable) as got:
        host.run("lsmod")
    assert time.monotonic() - start < 5
    text = str(got.value)
    assert "stopped answering: `lsmod` got no answer within 1 s" in text
    assert "1 probe(s) answered, the last `uname -r`" in text


def test_past_the_per_host_deadline_no_probe_runs(hanging_ssh: Path) -> None:
    calls: list[str] = []

    class Counting:
        def run(self, line: str) -> None:
            calls.append(line)

    host = ReadOnlyHost(Counting(), "gpu1", deadline=time.monotonic() - 1, host_timeout=300)
    with pytest.raises(HostUnreachable, match=r"per-host deadline \(300 s, --host-timeout\)"):
        host.run("uname", "-r")
    assert calls == []


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (
            ["--ssh-config", "/nonexistent/h29-ssh_config"],
            "--ssh-config /nonexistent/h29-ssh_config",
        ),
        (["--host-timeout", "0"], "not a number from 1 to 3600: '0'"),
        (["--server-alive-interval", "x"], "not a number from 1 to 600: 'x'"),
    ],
)
def test_bad_ssh_options_are_exit_2_naming_the_value(
    capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    from builder.cli import main

    try:
        code = main(["preflight", "--hosts", "ssh://gpu1.example", "--no-images", *args])
    except SystemExit as exc:  # argparse's own exit for a value its type refuses
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2 and needle in err and "Traceback" not in err, err
