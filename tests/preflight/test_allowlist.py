"""Preflight only reads: every command it can run is on the allow-list, the allow-list holds only
read-only shapes, and anything else is refused before it reaches a host."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

import pytest

from builder.preflight import allowlist
from builder.preflight.gather import gather
from builder.preflight.hostio import HostUnreachable, ReadOnlyHost
from tests.preflight.conftest import RunFixture
from tests.preflight.fakehost import HOSTS

# The programs preflight may start, each of which only reads in the shapes allowed. A new
# program must be added here on purpose, with a reason in allowlist.ALLOWED.
READ_ONLY_PROGRAMS = {
    "cat", "ls", "uname", "grubby", "rpm", "dkms", "mokutil", "nvidia-smi", "nvidia-ctk",
    "nv-fabricmanager", "lsmod", "modinfo", "systemctl", "podman", "getenforce", "df", "lspci",
    "journalctl", "id", "printenv", "dnf", "dockerd", "containerd",
}  # fmt: skip


def test_the_allow_list_names_only_read_only_programs() -> None:
    assert allowlist.PROGRAMS == READ_ONLY_PROGRAMS
    assert all(shape.why for shape in allowlist.ALLOWED)


@pytest.mark.parametrize(
    "argv",
    [
        ("rm", "-rf", "/"),
        ("dnf", "install", "-y", "nvidia-driver"),
        ("dnf", "install", "--assumeno", "nvidia-driver"),
        ("dnf", "-q", "--cacheonly", *allowlist.DNF_REPOQUERY),  # no spec
        ("dnf", "-q", "--cacheonly", *allowlist.DNF_REPOQUERY, "kmod-nvidia-*"),  # any kmod
        ("dnf", "-q", "--cacheonly", *allowlist.DNF_REPOQUERY, "nvidia-driver-580.95.05;reboot"),
        ("dnf", "-q", *allowlist.DNF_REPOQUERY, "kernel-devel-$(reboot).el9.x86_64"),
        ("dnf", "-q", *allowlist.DNF_REPOQUERY, "kernel-devel-5.14.0-1.el9.x86_64 x"),
        ("dnf", "-q", *allowlist.DNF_REPOQUERY, "--setopt=reposdir=/tmp", "dkms"),
        ("dnf", "-q", "--installroot=/tmp", *allowlist.DNF_REPOQUERY, "dkms"),
        ("dnf", "-q", "--refresh", *allowlist.DNF_REPOQUERY, "dkms"),
        ("dnf", "-q", *allowlist.DNF_REPOQUERY, *["dkms"] * (allowlist.DNF_SPECS_MAX + 1)),
        ("dnf", "-q", "module", "enable", "nvidia-driver:580-open"),
        ("dnf", "-q", "module", "list", "--", "kernel"),
        ("dnf", "makecache"),
        ("modprobe", "nvidia"),
        ("rmmod", "nouveau"),
        ("systemctl", "restart", "nvidia-fabricmanager"),
        ("systemctl", "show", f"--property={allowlist.SYSTEMD_PROPERTIES}", "sshd"),
        ("systemctl", "show", "--property=ExecStart", "nvidia-persistenced"),
        ("dkms", "install", "nvidia/570.124.06"),
        ("dkms", "autoinstall"),
        ("mokutil", "--import", "/var/lib/dkms/mok.pub"),
        ("mokutil", "--test-key", "/root/other.pub"),
        ("nvidia-smi", "-pm", "1"),  # persistence mode: a write
        ("nvidia-smi", "-r"),  # GPU reset
        ("nvidia-ctk", "cdi", "generate", "--output=/etc/cdi/nvidia.yaml"),
        ("podman", "rm", "-f", "x"),
        ("podman", "image", "inspect", "--format", "{{.Id}}"),
        ("podman", "image", "inspect", "$(reboot)"),
        ("rpm", "-e", "kernel-core"),
        ("rpm", "-q", "--qf", allowlist.RPM_QF, "bash"),  # not a package preflight asks about
        ("cat", "/etc/shadow"),
        ("cat", "/etc/cdi/../shadow"),
        ("cat", "/etc/cdi/nvidia.yaml", "/etc/shadow"),
        ("ls", "-1", "/root"),
        ("ls", "-1d", "--", "/etc/cdi/../../root/.ssh"),
        ("ls", "-1d", "--"),
        ("df", "-P", "-k", "/home"),
        ("uname", "-r", ";", "reboot"),
        ("sh", "-c", "cat /etc/os-release"),
        ("getenforce", "0"),
        (),
    ],
)
def test_anything_else_is_refused(argv: tuple[str, ...]) -> None:
    assert not allowlist.permitted(argv)
    with pytest.raises(allowlist.NotAllowed):
        allowlist.probe_line(argv)


@dataclass
class Recorder:
    lines: list[str] = field(default_factory=list)

    def run(self, line: str) -> object:
        self.lines.append(line)
        raise AssertionError("a refused command reached the host")


def test_a_refused_command_never_reaches_the_host() -> None:
    rec = Recorder()
    host = ReadOnlyHost(rec, "h")
    with pytest.raises(allowlist.NotAllowed):
        host.run("systemctl", "stop", "nvidia-persistenced")
    assert rec.lines == []


def test_render_quotes_every_argument_and_unrender_inverts_it() -> None:
    argv = ("rpm", "-q", "--qf", allowlist.RPM_QF, "kernel-core")
    line = allowlist.probe_line(argv, 7)
    assert line.startswith("LC_ALL=C timeout -k 5 7 rpm -q --qf '%{NAME}")
    assert allowlist.probe_argv(line) == argv
    assert shlex.split(line)[-1] == "kernel-core"
    with pytest.raises(allowlist.NotAllowed):
        allowlist.probe_argv("reboot")


@pytest.mark.parametrize("name", HOSTS)
def test_preflight_runs_only_allowed_commands_on_every_fixture_host(
    name: str, run_fixture: RunFixture
) -> None:
    _, fake = run_fixture(name, "570.124.06")
    assert fake.lines, "nothing ran"
    argvs = [allowlist.probe_argv(line) for line in fake.lines]
    assert all(allowlist.permitted(a) for a in argvs)
    assert {a[0] for a in argvs} <= READ_ONLY_PROGRAMS
    # every recorded probe the fixture offers is one preflight really asks (no drift)
    asked = set(argvs)
    offered = {r.argv for r in fake.fixture.recordings if not r.prefix and not r.never}
    assert offered <= asked, offered - asked
    never = {r.argv for r in fake.fixture.recordings if r.never}
    assert not never & asked, never & asked


def test_a_transport_failure_is_unreachable_not_a_finding() -> None:
    @dataclass
    class Down:
        rc: int
        stdout: str = ""
        stderr: str = "ssh: connect to host gpu7 port 22: Connection refused"

    class Ssh:
        def run(self, line: str) -> Down:
            return Down(255)

    with pytest.raises(HostUnreachable, match="Connection refused"):
        gather(ReadOnlyHost(Ssh(), "gpu7"))
