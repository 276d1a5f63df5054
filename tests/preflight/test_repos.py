"""`--repos` without dnf: the recorded rehearsal hosts replay their verdicts, the probe's argv
are fixed and validated, and every way dnf can fail is a finding (tests/preflight/
test_repos_rehearsal.py runs the real dnf)."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from builder.cli import main
from builder.facts import nvidia_packages as nv_pkgs
from builder.facts.driver_version import DriverVersion
from builder.host import parsers
from builder.judgement.finding import Finding
from builder.judgement.severity import BLOCK, OK, SKIP, WARN
from builder.preflight import allowlist
from builder.preflight.checks import HOST_CHECKS, run_one
from builder.preflight.gather import gather
from builder.preflight.host_state import HostState
from builder.preflight.hostio import ReadOnlyHost
from builder.preflight.model import UpgradePlan
from builder.preflight.record import Record, Recording, ReplayHost
from builder.preflight.repos_probe import repo_specs
from tests.preflight.conftest import PREFLIGHT_MATRIX, TODAY
from tests.preflight.fakehost import FIXTURES

REPOS = FIXTURES / "repos"
DRIVER = "580.95.05"
PLAN = UpgradePlan(DriverVersion(DRIVER), "proprietary", repos=True)
CHECK = next(r for r in HOST_CHECKS if r.id == "driver.repos")
ERRATA = "5.14.0-570.17.1.el9_6.x86_64"


def replayed(
    name: str, plan: UpgradePlan = PLAN, edit: list[Recording] | None = None, base: Path = REPOS
) -> tuple[HostState, Finding, ReplayHost]:
    rec = Record.load(base / name, name)
    rec.recordings[:0] = edit or []  # the first match answers
    replay = ReplayHost(rec)
    state = gather(ReadOnlyHost(replay, name), images=False, repos=plan if plan.repos else None)
    return state, run_one(CHECK, state, plan, TODAY), replay


def dnf_lines(replay: ReplayHost) -> list[tuple[str, ...]]:
    return [a for a in map(allowlist.probe_argv, replay.lines) if a[0] == "dnf"]


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["preflight", "--matrix", str(PREFLIGHT_MATRIX), "--json", "--no-images",
                 "--today", str(TODAY), *args])  # fmt: skip
    return code, json.loads(capsys.readouterr().out)


def repos_check(doc: dict[str, Any]) -> dict[str, Any]:
    (found,) = [c for c in doc["hosts"][0]["checks"] if c["id"] == "driver.repos"]
    assert isinstance(found, dict)
    return found


@pytest.mark.parametrize("name", ["el9-repos-kmod-published", "el9-repos-errata-no-kmod"])
def test_a_recorded_repos_host_replays_its_verdict(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = Record.load(REPOS / name, name)
    want = rec.expect["checks"]["driver.repos"]
    code, doc = cli(capsys, "--from", str(REPOS / name), "--target-driver", rec.expect["target"],
                    "--target-module", rec.expect["target_module"], "--repos")  # fmt: skip
    found = repos_check(doc)
    assert found["severity"] == want
    if want == "block":
        assert code == 1
        assert found["finding"].startswith("breaks: nothing installs the nvidia 580.95.05 module")
        assert (
            f"no kmod-nvidia-{DRIVER}-5.14.0-570.17.1 in the host's repositories"
            in (found["finding"])
        )
        assert f"DKMS lacks kernel-devel-{ERRATA}" in found["finding"]
        assert f"dnf install kernel-devel-{ERRATA}," in found["remediation"]
    else:
        assert f"kmod-nvidia-{DRIVER}-5.14.0-570.12.1-{DRIVER}-2.el9_6.x86_64" in found["finding"]
    # the now verdict (no target) does not judge the target's packages as the host's
    now = [c for c in doc["hosts"][0]["now_checks"] if c["id"] == "driver.repos"]
    assert now[0]["severity"] == "skip" and "see the plan" in now[0]["finding"]


def test_without_repos_dnf_is_never_asked_and_the_check_says_so() -> None:
    state, finding, replay = replayed("el9-repos-errata-no-kmod", replace(PLAN, repos=False))
    assert finding.severity == SKIP and finding.message.startswith("not asked: --repos")
    assert dnf_lines(replay) == [] and state.repos is None


def test_the_probe_argv_are_fixed_words_and_validated_values() -> None:
    _, _, replay = replayed("el9-repos-errata-no-kmod")
    specs = (
        f"nvidia-driver-{DRIVER}", f"kmod-nvidia-{DRIVER}-*", f"kmod-nvidia-open-{DRIVER}-*",
        f"kmod-nvidia-latest-dkms-{DRIVER}", f"kmod-nvidia-open-dkms-{DRIVER}", "dkms",
        "kernel-devel-5.14.0-503.35.1.el9_5.x86_64", f"kernel-devel-{ERRATA}",
    )  # fmt: skip
    query = ("repoquery", "--latest-limit", "1", "--qf", parsers.DNF_REPOQUERY_QF, "--", *specs)
    assert dnf_lines(replay) == [
        ("dnf", "-q", "--cacheonly", *query),  # the cache first: it said there is none
        ("dnf", "-q", *query),  # then dnf refreshes its metadata cache
        ("dnf", "-q", "module", "list", "--", "nvidia-driver"),
        # the running kernel has a way in: resolved as a transaction, answered no
        ("dnf", "-q", "install", "--assumeno", "--", f"nvidia-driver-{DRIVER}",
         f"kmod-nvidia-{DRIVER}-5.14.0-503.35.1"),
    ]  # fmt: skip
    # the glob reaches dnf as one quoted word (no shell expands it), under dnf's longer timeout
    first = next(line for line in replay.lines if " dnf -q " in line)
    assert first.startswith("LC_ALL=C timeout -k 5 120 dnf -q --cacheonly repoquery ")
    assert " 'kmod-nvidia-580.95.05-*' " in first


@pytest.mark.parametrize(
    "kernel",
    [
        "5.14.0-570.17.1.el9_6.x86_64$(reboot)",
        "5.14.0-570.17.1.el9_6.x86_64 --setopt=reposdir=/tmp",
        "5.14.0-570.17.1.el9_6.x86_64;id",
        "../../../etc/shadow",
        "6.1.0-28-amd64",  # a Debian kernel: not an EL release
        "5.14.0-427.13.1.el9_4.x86_64+debug",  # a variant: its devel is kernel-debug-devel
        "5.14.0-284.11.1.rt14.296.el9_2.x86_64",  # RT: kernel-rt-devel
    ],
)
def test_a_running_kernel_that_is_not_an_el_release_never_reaches_dnf(kernel: str) -> None:
    uname = Recording(("uname", "-r"), f"{kernel}\n", "", 0, "")  # taken as the host says it
    rec = Record.load(REPOS / "el9-repos-kmod-published")
    answer = next(r for r in rec.recordings if r.argv[:2] == ("dnf", "-q") and r.rc == 0)
    any_dnf = replace(answer, argv=("dnf",), prefix=True)  # whatever it is asked
    state, finding, replay = replayed("el9-repos-kmod-published", edit=[uname, any_dnf])
    assert state.repos is not None and state.repos.refused == [kernel] == [state.kernel]
    assert dnf_lines(replay) and not any(kernel in " ".join(a) for a in dnf_lines(replay))
    # the next boot is covered; the running kernel could not be asked about: a warning
    assert finding.severity == WARN and "not a plain EL kernel release" in finding.message
    assert "5.14.0-570.12.1.el9_6.x86_64 (next boot): kmod-nvidia-580.95.05" in finding.message
    assert nv_pkgs.kernel_base(kernel) is None


def test_every_spec_the_probe_makes_is_allowed_and_a_bad_version_is_not() -> None:
    for version in ("580.95.05", "570.26", "620.10.01", "1000.1.1"):
        kernels = ["5.14.0-570.12.1.el9_6.x86_64", "6.12.0-55.9.1.el10_0.aarch64"]
        specs = repo_specs(version, kernels)
        assert allowlist.permitted(("dnf", "-q", "--cacheonly", *allowlist.DNF_REPOQUERY, *specs))
    for bad in ("580.95.05;reboot", "58", "580.95.05 x", "580.*"):
        assert not allowlist.permitted(("dnf", "-q", *allowlist.DNF_REPOQUERY,
                                        f"nvidia-driver-{bad}"))  # fmt: skip


def _dnf_answer(rc: int, stderr: str) -> list[Recording]:
    """Every dnf line of the errata record answered with `rc` and `stderr`."""
    rec = Record.load(REPOS / "el9-repos-errata-no-kmod")
    dnf = [r for r in rec.recordings if r.argv[0] == "dnf"]
    return [replace(r, rc=rc, stdout="", stderr=stderr) for r in dnf]


@pytest.mark.parametrize(
    ("rc", "stderr", "said"),
    [
        (127, "timeout: failed to run command 'dnf': No such file or directory\n", "not installed"),
        (124, "", "timed out after 120 s"),
        (1, "Error: Failed to download metadata for repo 'cuda-rhel9-x86_64'\n",
         "Failed to download metadata"),
    ],
)  # fmt: skip
def test_dnf_failing_is_a_warning_never_a_pass(rc: int, stderr: str, said: str) -> None:
    _, finding, _ = replayed("el9-repos-errata-no-kmod", edit=_dnf_answer(rc, stderr))
    assert finding.severity == WARN and said in finding.message, finding
    assert "dnf makecache" in finding.remediation


def test_a_record_asked_about_another_driver_is_not_judged_from_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, doc = cli(capsys, "--from", str(REPOS / "el9-repos-kmod-published"), "--target-driver",
                    "580.105.08", "--target-module", "proprietary", "--repos")  # fmt: skip
    found = repos_check(doc)
    assert found["severity"] == "warn" and "unrecorded" in found["finding"]


def test_a_debian_host_is_not_asked(capsys: pytest.CaptureFixture[str]) -> None:
    _, finding, replay = replayed("debian12-l40s-healthy", base=FIXTURES)
    assert finding.severity == SKIP and "not an EL host" in finding.message
    assert dnf_lines(replay) == []


def test_the_kmod_of_the_other_flavour_does_not_count() -> None:
    open_plan = replace(PLAN, target_module="open")
    _, finding, _ = replayed("el9-repos-kmod-published", open_plan)
    # only proprietary kmods are published, and no open DKMS kmod: the open plan breaks
    assert finding.severity == BLOCK
    assert f"no kmod-nvidia-open-{DRIVER}-5.14.0-570.12.1" in finding.message
    assert f"kmod-nvidia-open-dkms-{DRIVER}" in finding.message


def test_without_a_target_the_driver_the_next_boot_runs_is_asked_for() -> None:
    base = Record.load(FIXTURES / "el9-h100")  # R550 loaded; its modinfo and /proc answers
    rec = Record.load(REPOS / "el9-repos-kmod-published")
    answer = next(r for r in rec.recordings if r.argv[:2] == ("dnf", "-q") and r.rc == 0)
    state, finding, replay = replayed(
        "el9-h100", UpgradePlan(repos=True), [replace(answer, argv=("dnf",), prefix=True)], FIXTURES
    )
    assert state.repos is not None and state.repos.version == "550.144.03"
    assert any("nvidia-driver-550.144.03" in argv for argv in dnf_lines(replay))
    # the answer offers 580.95.05 only; what is installed rebuilds 550.144.03 for the kernel
    assert finding.severity == OK, finding
    assert "nvidia-driver-550.144.03 (installed)" in finding.message
    assert (
        "5.14.0-503.35.1.el9_5.x86_64 (running + next boot): DKMS: kmod-nvidia-latest-dkms-"
        "550.144.03 (installed) + dkms (installed) + kernel-devel-5.14.0-503.35.1.el9_5.x86_64 "
        "(installed)"
    ) in finding.message
    assert base.name == "el9-h100"


def test_no_driver_and_no_target_asks_nothing() -> None:
    state, finding, replay = replayed("el9-repos-kmod-published", UpgradePlan(repos=True))
    assert state.repos is None and dnf_lines(replay) == []
    assert finding.severity == SKIP and "no version to ask for" in finding.message


def _install_answer(rc: int, stderr: str) -> list[Recording]:
    """Every `dnf install --assumeno` of the published record answered with `rc`, `stderr`."""
    rec = Record.load(REPOS / "el9-repos-kmod-published")
    lines = [r for r in rec.recordings if r.argv[:3] == ("dnf", "-q", "install")]
    assert lines
    return [replace(r, rc=rc, stdout="", stderr=stderr) for r in lines]


def test_names_found_but_a_transaction_dnf_cannot_resolve_breaks() -> None:
    problem = (
        "Error: \n Problem: conflicting requests\n  - nothing provides nvidia-kmod-common = "
        "3:580.95.05 needed by nvidia-driver-3:580.95.05-1.el9.x86_64\n"
    )
    _, finding, _ = replayed("el9-repos-kmod-published", edit=_install_answer(1, problem))
    assert finding.severity == BLOCK
    assert finding.message.startswith(f"breaks: dnf cannot install kmod-nvidia-{DRIVER}-")
    assert "nothing provides nvidia-kmod-common = 3:580.95.05" in finding.message
    assert finding.remediation.startswith("resolve what dnf names")


def test_as_another_user_the_transaction_is_not_resolved_and_the_finding_says_so() -> None:
    root = (
        "Error: This command has to be run with superuser privileges (under the Unix command line)."
    )
    _, finding, _ = replayed("el9-repos-kmod-published", edit=_install_answer(1, root + "\n"))
    assert finding.severity == OK
    assert "not resolved as a transaction: dnf install needs root" in finding.message


def test_a_transaction_that_times_out_warns() -> None:
    _, finding, _ = replayed("el9-repos-kmod-published", edit=_install_answer(124, ""))
    assert finding.severity == WARN and "timed out after 120 s" in finding.message


@pytest.mark.parametrize(
    "specs",
    [
        (f"kmod-nvidia-{DRIVER}-*",),  # a glob: only the exact packages found
        ("bash",),
        (f"nvidia-driver-{DRIVER}", "dkms", "dkms", "dkms", "dkms"),  # at most 4
        (f"kernel-devel-{ERRATA};reboot",),
    ],
)
def test_the_install_shape_takes_only_the_exact_packages_found(specs: tuple[str, ...]) -> None:
    for cache in (("-q", "--cacheonly"), ("-q",)):
        assert not allowlist.permitted(("dnf", *cache, *allowlist.DNF_INSTALL, *specs))
    assert allowlist.permitted(("dnf", "-q", *allowlist.DNF_INSTALL, f"nvidia-driver-{DRIVER}"))
    assert not allowlist.permitted(("dnf", "-q", "install", "-y", "--", "dkms"))
    assert not allowlist.permitted(("dnf", "-q", "install", "--assumeyes", "--", "dkms"))


def test_the_recorded_hosts_judged_as_a_fleet(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = cli(capsys, "--from", str(REPOS), "--target-driver", DRIVER, "--target-module",
                    "proprietary", "--repos", "--jobs", "2")  # fmt: skip
    got = {
        h["host"]: next(c["severity"] for c in h["checks"] if c["id"] == "driver.repos")
        for h in doc["hosts"]
    }
    assert got == {"el9-repos-errata-no-kmod": "block", "el9-repos-kmod-published": "ok"}
    assert code == 1 and doc["reasons"]["driver.repos"] == 1
    probes = doc["hosts"][0]["facts"]["probes"]  # what was asked is in the JSON, with its rc
    assert probes["dnf-repoquery"]["rc"] == 1 and probes["dnf-repoquery (refresh)"]["rc"] == 0


def test_dnf_is_not_started_past_the_host_deadline_and_the_host_keeps_its_answers() -> None:
    rec = Record.load(REPOS / "el9-repos-errata-no-kmod")
    replay = ReplayHost(rec)
    # 20 s left: enough for the quick probes, not for dnf (it would make the host unreachable)
    host = ReadOnlyHost(replay, "h", deadline=time.monotonic() + 20, host_timeout=300)
    state = gather(host, images=False, repos=PLAN)
    finding = run_one(CHECK, state, PLAN, TODAY)
    assert dnf_lines(replay) == [] and state.kernel is not None
    assert finding.severity == WARN
    assert "dnf was not started: the per-host deadline (300 s) left" in finding.message
    assert "--host-timeout" in finding.message
