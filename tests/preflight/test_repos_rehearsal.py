"""The `--repos` rehearsal, with real dnf: Debian's dnf 4 against loopback repositories of
stand-in RPMs with NVIDIA's real names (tests/preflight/repos_rehearsal.py).

The host is el9-h100's record for every probe but dnf's (its next-boot kernel set per case),
and this machine's real dnf, through testinfra's local backend, for `--repos`' probes: the
argv is preflight's own. The errata repository has the precompiled kmod for the running kernel
and for 5.14.0-570.12.1.el9_6, none for the errata kernel 5.14.0-570.17.1.el9_6 and no
kernel-devel for it; the synced one adds that kernel-devel (DKMS then builds the module).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from builder.cli import main
from builder.facts.driver_version import DriverVersion
from builder.judgement.finding import Finding
from builder.judgement.severity import BLOCK, OK
from builder.preflight import allowlist
from builder.preflight.checks import HOST_CHECKS, run_one
from builder.preflight.gather import gather
from builder.preflight.host_state import HostState
from builder.preflight.hostio import ReadOnlyHost
from builder.preflight.model import UpgradePlan
from builder.preflight.record import Record, Recording, ReplayHost, write_record
from tests.preflight.conftest import PREFLIGHT_MATRIX, TODAY
from tests.preflight.fakehost import FIXTURES
from tests.preflight.repos_rehearsal import (
    DKMS,
    DKMS_KMOD,
    DRIVER,
    DRIVER_PKG,
    DRIVER_PKG_UNMET,
    NEXT_ERRATA,
    NEXT_WITH_KMOD,
    RUNNING,
    Server,
    build_repo,
    kernel_devel,
    precompiled_kmod,
    sandboxed_dnf,
)

TOOLS = ("dnf", "rpmbuild", "createrepo_c", "modifyrepo_c")
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not all(shutil.which(t) for t in TOOLS), reason=f"needs {', '.join(TOOLS)} (Debian's)"
    ),
]
PLAN = UpgradePlan(DriverVersion(DRIVER), "proprietary", repos=True)
REPOS_CHECK = next(r for r in HOST_CHECKS if r.id == "driver.repos")


@dataclass
class RoutedHost:
    """A record answers every probe but dnf's; this machine's dnf answers those."""

    replay: ReplayHost
    local: Any  # testinfra's local host

    def run(self, line: str) -> Any:
        if allowlist.probe_argv(line)[0] == "dnf":
            return self.local.run(line)
        return self.replay.run(line)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    work = tmp_path_factory.mktemp("repos")
    errata = [
        DRIVER_PKG,
        precompiled_kmod(RUNNING),
        precompiled_kmod(NEXT_WITH_KMOD),
        DKMS_KMOD,
        DKMS,
        kernel_devel(RUNNING),
        kernel_devel(NEXT_WITH_KMOD),
    ]
    build_repo(work, "errata", errata, modules=True)
    build_repo(work, "synced", [*errata, kernel_devel(NEXT_ERRATA)])
    build_repo(work, "unmet", [DRIVER_PKG_UNMET, *errata[1:]])
    server = Server(work / "www")
    try:
        yield work, f"http://127.0.0.1:{server.port}"
    finally:
        server.stop()
    assert server.proc.poll() is not None  # stopped


def judge(
    served: Any, monkeypatch: pytest.MonkeyPatch, sandbox: str, repo: str, next_boot: str
) -> tuple[HostState, Finding, ReadOnlyHost]:
    work, url = served
    bindir = sandboxed_dnf(work, sandbox, f"{url}/{repo}/")
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    import testinfra

    rec = Record.load(FIXTURES / "el9-h100", "el9-h100")
    grubby = Recording(("grubby", "--default-kernel"), f"/boot/vmlinuz-{next_boot}\n", "", 0, "")
    rec.recordings.insert(0, grubby)
    host = ReadOnlyHost(RoutedHost(ReplayHost(rec), testinfra.get_host("local://")), sandbox)
    state = gather(host, images=False, repos=PLAN)
    return state, run_one(REPOS_CHECK, state, PLAN, TODAY), host


def dnf_lines(host: ReadOnlyHost) -> list[tuple[str, ...]]:
    return [o.argv for o in host.log if o.argv[0] == "dnf"]


def test_next_boot_kernel_with_a_kmod_is_ok_first_refreshing_then_from_the_cache(
    served: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    state, finding, host = judge(served, monkeypatch, "host-a", "errata", NEXT_WITH_KMOD)
    assert finding.severity == OK, finding
    assert f"kmod-nvidia-{DRIVER}-5.14.0-570.12.1-{DRIVER}-2.el9_6.x86_64" in finding.message
    assert f"{NEXT_WITH_KMOD} (next boot)" in finding.message
    assert "nvidia-driver:580-dkms" in finding.message  # the module's streams were listed
    # no cache yet: --cacheonly said so, and dnf refreshed its metadata to answer
    assert state.repos is not None and state.repos.cache == "refreshed"
    first = dnf_lines(host)
    assert first[0][:3] == ("dnf", "-q", "--cacheonly") and first[1][:2] == ("dnf", "-q")
    assert "--cacheonly" not in first[1]
    # the packages found were resolved as a transaction dnf was told not to run
    kmod = f"kmod-nvidia-{DRIVER}-5.14.0-570.12.1"
    assert ("dnf", "-q", "install", "--assumeno", "--", f"nvidia-driver-{DRIVER}", kmod) in first
    assert "not resolved" not in finding.message
    # asked again, dnf answers from the cache it now has, refreshing nothing
    state, again, host = judge(served, monkeypatch, "host-a", "errata", NEXT_WITH_KMOD)
    assert again.severity == OK and state.repos is not None and state.repos.cache == "cache"
    assert all("--cacheonly" in argv for argv in dnf_lines(host))


def test_next_boot_errata_kernel_without_kmod_or_kernel_devel_breaks(
    served: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, finding, _ = judge(served, monkeypatch, "host-b", "errata", NEXT_ERRATA)
    assert finding.severity == BLOCK, finding
    assert finding.message.startswith("breaks: nothing installs the nvidia 580.95.05 module")
    assert f"kmod-nvidia-{DRIVER}-5.14.0-570.17.1" in finding.message
    assert f"kernel-devel-{NEXT_ERRATA}" in finding.message
    assert f"{RUNNING} (running): kmod-nvidia-{DRIVER}-5.14.0-503.35.1" in finding.message
    assert f"dnf install kernel-devel-{NEXT_ERRATA}" in finding.remediation
    assert f"grubby --set-default /boot/vmlinuz-{RUNNING}" in finding.remediation


def test_errata_kernel_with_kernel_devel_published_installs_through_dkms(
    served: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, finding, _ = judge(served, monkeypatch, "host-c", "synced", NEXT_ERRATA)
    assert finding.severity == OK, finding
    assert f"{NEXT_ERRATA} (next boot): DKMS: kmod-nvidia-latest-dkms-{DRIVER}" in finding.message
    assert f"kernel-devel-{NEXT_ERRATA.replace('.x86_64', '')}" in finding.message


def test_a_driver_whose_dependencies_are_not_published_breaks_though_every_name_is_there(
    served: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, finding, _ = judge(served, monkeypatch, "host-f", "unmet", NEXT_WITH_KMOD)
    assert finding.severity == BLOCK, finding
    assert finding.message.startswith(
        f"breaks: dnf cannot install kmod-nvidia-{DRIVER}-5.14.0-570.12.1-{DRIVER}-2.el9_6"
    )
    assert "nvidia-kmod-common" in finding.message  # dnf's own words
    assert finding.remediation.startswith("resolve what dnf names")


def test_a_recorded_rehearsal_replays_to_the_same_verdict(
    served: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for sandbox, next_boot, severity in (
        ("host-d", NEXT_ERRATA, "block"),
        ("host-e", NEXT_WITH_KMOD, "ok"),
    ):
        _, live, host = judge(served, monkeypatch, sandbox, "errata", next_boot)
        assert str(live.severity) == severity
        write_record(tmp_path / sandbox, sandbox, "local://", host.log, TODAY)
        monkeypatch.setenv("PATH", "/usr/bin:/bin")  # the replay reaches no dnf
        args = ["--target-driver", DRIVER, "--target-module", "proprietary", "--repos"]
        code = main(["preflight", "--matrix", str(PREFLIGHT_MATRIX), "--json", "--no-images",
                     "--today", str(TODAY), "--from", str(tmp_path / sandbox), *args])  # fmt: skip
        doc = json.loads(capsys.readouterr().out)
        (replayed,) = [c for c in doc["hosts"][0]["checks"] if c["id"] == "driver.repos"]
        assert (replayed["severity"], replayed["finding"]) == (severity, live.message)
        assert code == 1 or severity == "ok"
