"""A fleet over real OpenSSH (sshd in network namespaces, tests/preflight/sshd_hosts.py): a host
that stops answering mid-run (its sshd hung, or its network dropping every packet) and a host
whose key is unknown end within the deadline as those
hosts' errors, the others are judged, and no remote home changes (no rc file is read)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder.cli import main
from tests.preflight.sshd_hosts import SshdHosts, missing_tools, tree

pytestmark = [pytest.mark.integration]

# host 2's sshd hangs after its second probe starts, host 3's key is new, host 4's network drops
# every packet after its second probe starts
STOPS, UNKNOWN_KEY, DROPS = 2, 3, 4
HOST_TIMEOUT = 30


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshdHosts]:
    missing = missing_tools()
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed: scripts/setup.sh installs openssh-server")
    if os.geteuid() != 0:
        pytest.skip("sshd in network namespaces needs root")
    fleet = SshdHosts(tmp_path_factory.mktemp("sshd"), 5)
    try:
        fleet.up(known=[0, 1, STOPS, DROPS])
        yield fleet
    finally:
        fleet.down()


def _after(fleet: SshdHosts, sessions: int, within: float = 30) -> None:
    """Once hosts STOPS and DROPS have started `sessions` probes each, hang one, cut the other."""
    deadline = time.monotonic() + within
    todo = {STOPS: fleet.stop, DROPS: fleet.drop}
    while todo and time.monotonic() < deadline:
        for i in [i for i in todo if fleet.sessions(i) >= sessions]:
            todo.pop(i)(i)
        time.sleep(0.02)


def test_a_fleet_with_a_hung_host_and_an_unknown_key_finishes(
    hosts: SshdHosts, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(
        "[gpu]\n" + "".join(f"node{i} ansible_host={hosts.addr(i)}\n" for i in range(5))
    )
    homes = {i: tree(hosts.home(i)) for i in range(5)}
    stopper = threading.Thread(target=_after, args=(hosts, 2), daemon=True)
    stopper.start()
    start = time.monotonic()
    code = main(
        ["preflight", "--inventory", str(inventory), "--ssh-config", str(hosts.ssh_config),
         "--no-images", "--json", "--jobs", "4", "--timeout", "5",
         "--host-timeout", str(HOST_TIMEOUT), "--connect-timeout", "5",
         "--server-alive-interval", "1", "--server-alive-count-max", "2"]
    )  # fmt: skip
    elapsed = time.monotonic() - start
    stopper.join(timeout=5)
    out, err = capsys.readouterr()
    assert elapsed < HOST_TIMEOUT, f"the fleet took {elapsed:.1f} s"
    assert "Traceback" not in err
    doc = json.loads(out)
    by = {h["host"]: h for h in doc["hosts"]}
    assert code == 4 and doc["exit_code"] == 4  # two hosts unreachable: broken now, they fail
    for i in (0, 1):  # judged: every check ran, over ssh, as the test's user
        assert by[f"node{i}"]["reachable"], by[f"node{i}"]["checks"][0]
        assert len(by[f"node{i}"]["checks"]) > 10
        assert by[f"node{i}"]["facts"]["kernel"] == os.uname().release
    for i in (STOPS, DROPS):
        hung = by[f"node{i}"]
        assert not hung["reachable"]
        why = hung["checks"][0]["finding"]
        assert "failed mid-run" in why and "probe(s) answered, the last" in why, why  # how far
        assert "BUG_REPORT_URL" not in why  # ssh's words, not a cut-off probe output
        assert hosts.sessions(i) >= 2
    unknown = by[f"node{UNKNOWN_KEY}"]
    assert not unknown["reachable"]
    key_why = unknown["checks"][0]["finding"]
    assert "Host key verification failed" in key_why and "ssh-keyscan" in key_why, key_why
    assert "known_hosts" in key_why and hosts.sessions(UNKNOWN_KEY) == 0
    # no remote home changed: no rc file was read, nothing was created, moved or rewritten
    for i in range(5):
        assert tree(hosts.home(i)) == homes[i], f"home of node{i} changed"


def test_the_home_check_sees_a_shell_that_reads_rc_files(hosts: SshdHosts) -> None:
    """The control: a `bash -c` over the same ssh reads ~/.bashrc (sshd sets SSH_CLIENT, so
    bash sources it), and the tree comparison above would have seen it."""
    before = tree(hosts.home(1))
    proc = subprocess.run(
        ["ssh", "-F", str(hosts.ssh_config), "-o", "BatchMode=yes", "--", hosts.addr(1),
         "bash -c true"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    after = tree(hosts.home(1))
    assert after != before and "rc-was-read" in after
