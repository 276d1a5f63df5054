"""scripts/setup.sh waits for another apt/dpkg, saying who, and gives up after its bound. The
script is sourced (it then only defines its functions) with its lock list pointed at a file
this test locks the way apt and dpkg do (fcntl)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

HOLD = """
import fcntl, sys, time
lock = open(sys.argv[1], "w")
fcntl.lockf(lock, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def waiter(lock: Path, bound: int) -> list[str]:
    """bash that sources scripts/setup.sh and waits for `lock` (at most `bound` seconds)."""
    script = (
        f"source scripts/setup.sh\nAPT_LOCKS=({lock})\nAPT_LOCK_POLL=0.1\n"
        f"APT_LOCK_WAIT={bound}\nwait_for_apt_locks"
    )
    return ["bash", "-c", script]


def wait_for(lock: Path, bound: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(waiter(lock, bound), cwd=REPO, capture_output=True, text=True, timeout=30)


@pytest.fixture
def lock(tmp_path: Path) -> Path:
    path = tmp_path / "lock-frontend"
    path.touch()
    return path


def hold(lock: Path, seconds: float) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


@pytest.fixture
def holders() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait()


def test_a_free_lock_is_not_waited_for_and_sourcing_runs_nothing(lock: Path) -> None:
    proc = wait_for(lock, 1)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_waits_for_the_holder_saying_who(lock: Path, holders: list[subprocess.Popen[str]]) -> None:
    holder = hold(lock, 60)
    holders.append(holder)
    waiting = subprocess.Popen(
        waiter(lock, 60), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    holders.append(waiting)
    assert waiting.stderr is not None
    said = waiting.stderr.readline()  # it says so as soon as it finds the lock held
    assert f"waiting for another apt/dpkg to finish: pid {holder.pid} (" in said
    assert f"holds {lock}" in said
    assert waiting.poll() is None  # still waiting while the lock is held
    holder.kill()
    holder.wait()
    assert waiting.wait(timeout=30) == 0  # and done once the holder has gone


def test_gives_up_after_its_bound_naming_the_lock_and_the_pid(
    lock: Path, holders: list[subprocess.Popen[str]]
) -> None:
    holder = hold(lock, 30)
    holders.append(holder)
    proc = wait_for(lock, 1)
    assert proc.returncode == 1
    assert f"{lock} is still held by pid {holder.pid} after 1s" in proc.stderr
    assert "TRAINIMG_APT_LOCK_WAIT" in proc.stderr
    assert holder.poll() is None  # never touched


def sourced(script: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    """bash that sources scripts/setup.sh, then runs `script` (PATH as given)."""
    env = {"PATH": path or "/usr/bin:/bin", "HOME": "/nonexistent"}
    cmd = ["/bin/bash", "-c", f"source scripts/setup.sh\n{script}"]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=30, env=env)


def test_the_main_job_installs_only_podman_runc_and_debootstrap() -> None:
    """On a machine with none of the tools (PATH empty): --demo's packages, and the tests'."""
    demo = sourced("missing_packages demo | /usr/bin/sort", "/nonexistent")
    assert demo.returncode == 0, demo.stderr
    assert demo.stdout.split() == ["debootstrap", "podman", "runc"]
    tests = set(sourced("missing_packages tests", "/nonexistent").stdout.split())
    assert {"podman", "slurmd", "slurmctld", "munge", "dnf", "rpm"} <= tests
    assert not {"docker.io", "slurmd", "munge", "docker-registry"} & set(demo.stdout.split())


def test_installing_starts_no_service_and_leaves_none_enabled(tmp_path: Path) -> None:
    """systemd cannot run here: systemctl and apt-get are stand-ins that record what they are
    asked. During the install policy-rc.d says 101 (no start); a unit the install enabled is
    disabled and stopped after; one enabled before is left alone."""
    policy = tmp_path / "policy-rc.d"
    log = tmp_path / "log"
    script = f"""
POLICY_RC={policy}
enabled=" ssh.service "
have_systemd() {{ true; }}
systemctl() {{
    case "$1" in
    is-enabled) [[ "$enabled" == *" $3 "* ]] ;;
    disable) echo "disable $*" >>{log}; enabled=${{enabled/ $4 / }} ;;
    esac
}}
apt_get() {{
    if [ "$1" = install ]; then
        "$POLICY_RC" start docker.service; echo "policy says $?" >>{log}
        enabled="$enabled docker.service munge.service "
    fi
}}
install_quietly docker.io munge
echo "after: $enabled" >>{log}
test ! -e {policy} && echo "policy removed" >>{log}
"""
    done = sourced(script)
    assert done.returncode == 0, done.stderr
    lines = log.read_text().splitlines()
    assert "policy says 101" in lines and "policy removed" in lines
    assert "disable disable --now --quiet docker.service" in lines
    assert "disable disable --now --quiet munge.service" in lines
    assert not any("ssh.service" in line for line in lines if line.startswith("disable"))
    assert "docker.service was enabled by its package: disabling it" in done.stderr


def test_an_unknown_option_is_exit_2_with_the_usage() -> None:
    done = subprocess.run(["scripts/setup.sh", "--bogus"], cwd=REPO, capture_output=True,
                          text=True, timeout=30)  # fmt: skip
    assert done.returncode == 2 and "usage: scripts/setup.sh [--demo]" in done.stderr
