"""Every fixture host gives its expected verdicts; the upgrade verdicts that matter most; edge
cases."""

from __future__ import annotations

import dataclasses
from dataclasses import replace

import pytest

from builder.facts.driver_version import DriverVersion
from builder.judgement.finding import Finding
from builder.judgement.severity import BLOCK, OK, SKIP, WARN
from builder.preflight import allowlist, checks
from builder.preflight import images as img
from builder.preflight.gather import gather
from builder.preflight.host_state import HostState
from builder.preflight.hostio import ReadOnlyHost
from builder.preflight.model import UpgradePlan
from builder.preflight.report import exit_code
from tests.preflight.conftest import TODAY, RunFixture, check, severities
from tests.preflight.fakehost import HOSTS, FakeHost, Fixture


@pytest.mark.parametrize("name", HOSTS)
def test_fixture_hosts_give_their_expected_verdicts(name: str, run_fixture: RunFixture) -> None:
    report, fake = run_fixture(name)
    expect = fake.fixture.expect
    got = severities(report)
    assert {k: got[k] for k in expect["checks"]} == expect["checks"]
    assert exit_code([report]) == expect["exit"]
    assert got["host.reach"] == "ok"
    assert set(got) == set(checks.CHECK_IDS)


def state_of(name: str) -> HostState:
    fake = FakeHost(Fixture.load_fixture(name))
    return gather(ReadOnlyHost(fake, name))


# --- the upgrade verdicts that matter most ------------------------------------------------------


def test_h100_on_565_runs_cu128_only_through_forward_compatibility(
    run_fixture: RunFixture, matrix_images: list[img.ImageRecord]
) -> None:
    report, _ = run_fixture("el9-h100", "565.57.01")
    rows = [r for r in report.rows if r.image.source == "matrix" and r.image.cuda]
    assert len(rows) == sum(1 for i in matrix_images if i.cuda) > 0  # every CUDA cell judged
    pypi = [r for r in rows if r.image.cuda_source == "pypi"]
    assert [r.image.name for r in pypi] == ["debian12-cu128-py3.11-torch2.9.1-runtime"]
    for r in pypi:  # no cuda-compat: minor-version compatibility, the legacy hook refusing it
        assert r.after is not None and r.after.codes[:2] == ("require.hook-refuses", "cuda.mvc")
    for r in (r for r in rows if r not in pypi):
        assert r.after is not None and r.after.status == "fwd-compat", r.image.name
        assert any("forward compatibility" in why for why in r.after.reasons)
        # R565 is admitted by the label's window, but not in NVIDIA's cuda-compat-12-8 matrix
        assert any(
            "R565 is not in NVIDIA's forward-compatibility matrix" in w for w in r.after.reasons
        )
    assert check(report, "images.impact").severity is WARN


def test_geforce_on_565_is_broken_for_cu128(run_fixture: RunFixture) -> None:
    report, _ = run_fixture("el9-geforce", "565.57.01")
    rows = [r for r in report.rows if r.image.source == "matrix" and r.image.cuda]
    compat = [r for r in rows if r.image.cuda_source != "pypi"]
    assert compat and all(r.after is not None and r.after.status == "broken" for r in compat)
    # the PyPI-CUDA image has no cuda-compat to fail with 804: minor-version compatibility
    assert {r.after.status for r in rows if r not in compat and r.after} == {"mvc"}
    why = compat[0].after.reasons if compat[0].after else ()
    assert any("brand 'geforce'" in w and "cuda>=12.8" in w for w in why)
    assert any("804" in w for w in why)  # no cuda-compat on GeForce
    assert check(report, "images.impact").severity is BLOCK
    assert exit_code([report]) == 4  # broken on 550 too: it never ran here, 565 changes nothing


@pytest.mark.parametrize("name", ["el9-h100", "el9-geforce"])
def test_570_124_06_makes_cu128_fine(name: str, run_fixture: RunFixture) -> None:
    report, _ = run_fixture(name, "570.124.06")
    rows = [r for r in report.rows if r.image.cuda]
    assert rows and all(r.after is not None and r.after.status == "ok" for r in rows)
    assert check(report, "images.impact").severity is OK
    changes = {r.change for r in rows if r.image.cuda_source != "pypi"}
    assert changes == ({"improves"} if name == "el9-h100" else {"starts working"})
    assert {r.change for r in rows if r.image.cuda_source == "pypi"} == {"improves"}  # from mvc


def test_b200_on_a_proprietary_module_is_blocked(run_fixture: RunFixture) -> None:
    report, _ = run_fixture("el9-b200-proprietary", "570.124.06")
    module = check(report, "driver.module")  # the plan keeps proprietary
    assert module.severity is BLOCK and "open kernel modules" in module.message
    assert module.reason == "gpu.needs-open-modules"
    assert (
        report.now_checks is not None
        and check(replace(report, checks=report.now_checks), "driver.module").severity is BLOCK
    )  # and so does the host now
    rows = [r for r in report.rows if r.image.cuda]
    assert rows and all(
        r.now.status == "broken" and r.after and r.after.status == "broken" for r in rows
    )
    assert exit_code([report]) == 4  # broken now and kept broken: nothing the plan breaks
    # with the open modules the plan itself is fine, and so are the images
    fixed, _ = run_fixture("el9-b200-proprietary", "570.124.06", "open")
    assert check(fixed, "driver.target").severity is WARN  # R570 reached its end of life
    assert check(fixed, "driver.module").severity is OK
    assert all(r.after and r.after.status == "ok" for r in fixed.rows if r.image.cuda)


def test_blackwell_on_a_535_window_is_broken_by_the_rules_not_the_label(
    run_fixture: RunFixture,
) -> None:
    report, _ = run_fixture("el9-b200-stale-cdi", "535.230.02")
    rows = [r for r in report.rows if r.image.cuda]
    assert all(r.after and r.after.status == "broken" for r in rows)
    assert all(
        r.after and any("needs driver branch R570+" in w for w in r.after.reasons) for r in rows
    )
    assert check(report, "driver.target").severity is BLOCK


# --- single findings ----------------------------------------------------------------------------


def test_stale_cdi_spec_names_the_missing_paths_and_the_old_driver(run_fixture: RunFixture) -> None:
    report, _ = run_fixture("el9-b200-stale-cdi")
    cdi = check(report, "cdi.spec")
    assert cdi.severity is BLOCK
    assert "generated for driver 570.86.15" in cdi.message and "570.124.06" in cdi.message
    assert "/usr/lib64/libcuda.so.570.86.15" in cdi.message
    assert "nvidia-ctk cdi generate" in cdi.remediation


def test_cdi_spec_is_a_reminder_before_an_upgrade_unless_the_refresh_unit_runs(
    run_fixture: RunFixture,
) -> None:
    report, _ = run_fixture("el9-h200-fm-mismatch", "570.133.20")
    assert check(report, "cdi.spec").severity is WARN
    assert "after the upgrade" in check(report, "cdi.spec").remediation
    refreshed, _ = run_fixture("el9-h100", "570.133.20")
    assert check(refreshed, "cdi.spec").severity is OK
    assert "nvidia-cdi-refresh.path" in check(refreshed, "cdi.spec").message


def test_fm_mismatch(run_fixture: RunFixture) -> None:
    report, _ = run_fixture("el9-h200-fm-mismatch", "570.133.20")
    fm = check(report, "fabricmanager")
    # the host as it is: blocked; the plan upgrades the fabric manager with the driver
    assert report.now_checks is not None
    now = check(replace(report, checks=report.now_checks), "fabricmanager")
    assert now.severity is BLOCK and "570.86.15 != driver 570.124.06" in now.message
    assert fm.severity is WARN and "570.86.15 != driver 570.124.06" in fm.message
    assert "nvidia-fabric-manager-570.133.20 libnvidia-nscq-570-570.133.20" in fm.remediation


def test_kernel_without_devel(run_fixture: RunFixture) -> None:
    report, _ = run_fixture("el9-l40s-no-kernel-devel", "570.133.20")
    devel = check(report, "kernel.devel")
    assert devel.severity is BLOCK and "5.14.0-503.35.1.el9_5.x86_64" in devel.message
    assert devel.remediation == "dnf install kernel-devel-5.14.0-503.35.1.el9_5.x86_64"
    dkms = check(report, "dkms.nvidia")
    assert dkms.severity is BLOCK and "next boot" in dkms.message
    assert "503.23.1.el9_5.x86_64 (running): DKMS builds 570.133.20" in dkms.message


def test_secure_boot_with_an_unenrolled_key(run_fixture: RunFixture) -> None:
    report, _ = run_fixture("el9-secureboot-unenrolled", "570.124.06")
    sb = check(report, "secureboot.mok")
    assert sb.severity is BLOCK and "not enrolled" in sb.message
    assert "mokutil --import /var/lib/dkms/mok.pub" in sb.remediation
    assert "Red Hat Secure Boot CA 5" in sb.message
    gpu = check(report, "gpu.inventory")
    assert (
        gpu.severity is WARN and "4x NVIDIA H100 PCIe" in gpu.message and "PCI only" in gpu.message
    )
    assert "does not load" in check(report, "driver.version").message


def test_gpu_processes_and_geforce_persistenced(run_fixture: RunFixture) -> None:
    report, _ = run_fixture("el9-geforce")
    procs = check(report, "gpu.processes")
    assert procs.severity is WARN and "48213" in procs.message
    assert check(report, "persistenced").severity is OK  # optional without data center GPUs
    assert "kernel command line" in check(report, "nouveau").message


# --- edge cases on a known-good state -----------------------------------------------------------


def h100() -> HostState:
    return state_of("el9-h100")


def run(
    state: HostState, target: str | None = None, module: str | None = None
) -> dict[str, Finding]:
    plan = UpgradePlan(DriverVersion(target) if target else None, module)
    return {c.id: c for c in checks.run_checks(state, plan, TODAY)}


def test_proprietary_target_on_r620_is_blocked() -> None:
    got = run(h100(), "620.10.02", "proprietary")
    target = got["driver.target"]
    assert target.severity is BLOCK and "no proprietary kernel modules" in target.message
    # without --target-module, R620 brings the only flavour it ships: open
    assert run(h100(), "620.10.02")["driver.target"].severity is OK


def test_an_r615_host_planning_r620_proprietary_is_blocked(run_fixture: RunFixture) -> None:
    """R620 ships open kernel modules only: a plan that keeps proprietary ones blocks; the same
    plan with open modules is judged like any other (and the host's own CUDA 13.4 is kept)."""
    report, _ = run_fixture("el9-l40s-r615-cuda13.4", "620.70.06", "proprietary")
    target = check(report, "driver.target")
    assert target.severity is BLOCK and "no proprietary kernel modules" in target.message
    assert exit_code([report]) == 1
    report, _ = run_fixture("el9-l40s-r615-cuda13.4", "620.70.06", "open")
    assert check(report, "driver.target").severity is OK
    assert report.facts["cuda"] == {"reported": "13.4", "rules": "13.4"}


def test_a_downgrade_warns() -> None:
    got = run(h100(), "535.230.02")
    assert got["driver.target"].severity is WARN
    assert "downgrade" in got["driver.target"].message


def test_nouveau_loaded_blocks_and_not_blacklisted_warns() -> None:
    state = h100()
    assert state.lsmod is not None
    loaded = dataclasses.replace(state, lsmod=state.lsmod | {"nouveau"})
    assert run(loaded)["nouveau"].severity is BLOCK
    from builder.host.parsers import Blacklist

    open_door = dataclasses.replace(state, blacklist=Blacklist(False, False, ()))
    assert run(open_door)["nouveau"].severity is WARN


def test_nvml_mismatch_blocks() -> None:
    state = h100()
    from builder.preflight.hostio import Output

    smi = Output(
        ("nvidia-smi",), 18, "Failed to initialize NVML: Driver/library version mismatch\n", ""
    )
    broken = dataclasses.replace(state, outputs={**state.outputs, "smi": smi})
    got = run(broken)["driver.version"]
    assert got.severity is BLOCK and "Driver/library version mismatch" in got.message


def test_versions_that_disagree_block() -> None:
    state = dataclasses.replace(h100(), sys_module_version=DriverVersion("550.127.05"))
    got = run(state)["driver.version"]
    assert got.severity is BLOCK and "disagree" in got.message


def test_old_toolkit_and_podman_block() -> None:
    state = dataclasses.replace(h100(), ctk_version="1.11.0", podman_version="4.0.2")
    got = run(state)
    assert got["toolkit.version"].severity is BLOCK
    assert got["podman.version"].severity is BLOCK


def test_a_missing_command_is_a_finding_not_a_crash() -> None:
    state = h100()
    from builder.preflight.hostio import Output

    gone = Output(("dkms", "status"), 127, "", "sh: 1: dkms: not found\n")
    no_dkms = dataclasses.replace(state, dkms=None, outputs={**state.outputs, "dkms": gone})
    got = run(no_dkms, "570.124.06")["dkms.nvidia"]
    assert got.severity is WARN and "`dkms` is not installed" in got.message


def test_an_eol_os_warns() -> None:
    from builder.host.parsers import OsRelease

    state = dataclasses.replace(h100(), os=OsRelease("centos", "7", "CentOS Linux 7 (Core)"))
    got = run(state)["host.os"]
    assert got.severity is WARN and "2024-06-30" in got.message


def test_skips_never_change_the_exit_code() -> None:
    got = run(h100())
    assert got["driver.target"].severity is SKIP


def test_os_family_comes_from_os_release_not_from_an_rpm_binary(run_fixture: RunFixture) -> None:
    """Debian with Debian's `rpm` installed is not an EL host."""
    report, fake = run_fixture("debian12-rpm-installed", "570.124.06")
    devel = check(report, "kernel.devel")
    assert devel.severity is SKIP and "not an EL host (os-release ID=debian)" in devel.message
    assert [r.argv[0] for r in fake.fixture.recordings if r.never] == ["rpm"]
    assert not any(allowlist.probe_argv(line)[0] == "rpm" for line in fake.lines)
    assert not any("dnf " in c.remediation for c in report.checks)
    assert exit_code([report]) == 3


def test_a_rocky10_host_is_known_el10_with_its_kernel_read(run_fixture: RunFixture) -> None:
    """Rocky Linux 10 (os-release ID=rocky, VERSION_ID=10.1): without its host fact preflight
    warned "not an OS the rules know"; its 6.12 el10 kernel is judged like an EL9 one."""
    report, _ = run_fixture("rocky10-l40s-r620", "620.70.06", "open")
    os_check = check(report, "host.os")
    assert os_check.severity is OK
    assert "(el10), supported until 2035-05-31" in os_check.message
    assert "wiki.rockylinux.org" in os_check.sources[0].ref
    kernel = "6.12.0-124.8.1.el10_1.x86_64"
    assert check(report, "kernel.devel").severity is OK
    assert kernel in check(report, "dkms.nvidia").message
