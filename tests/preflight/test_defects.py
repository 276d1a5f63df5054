"""One fixture host per preflight defect, each asserting the corrected verdict and remediation
(the fixtures' fixture.yaml say what each host is and where its outputs come from)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import replace

import pytest
from packaging.version import Version

from builder.facts.driver_version import DriverVersion
from builder.judgement.finding import Finding
from builder.judgement.image import ImageVerdict, judge
from builder.judgement.image_facts import DriverState
from builder.judgement.severity import BLOCK, OK, WARN
from builder.preflight import checks
from builder.preflight import images as img
from builder.preflight.fleet import FleetInputs, preflight_host
from builder.preflight.gather import gather
from builder.preflight.host_state import HostState
from builder.preflight.hostio import ReadOnlyHost
from builder.preflight.inventory import Target
from builder.preflight.model import UpgradePlan
from builder.preflight.report import exit_code
from tests.preflight.conftest import TODAY, RunFixture, check
from tests.preflight.fakehost import FakeHost, Fixture


def state_of(name: str) -> HostState:
    return gather(ReadOnlyHost(FakeHost(Fixture.load_fixture(name)), name))


def require(text: str, cuda: str) -> img.ImageRecord:
    return img.ImageRecord("probe", "local", (text,), "env", None, cuda, None)


def judge_image(
    rec: img.ImageRecord, driver: DriverVersion, cuda: Version | None = None
) -> ImageVerdict:
    return judge(rec.facts, DriverState(driver, "open", cuda), ())


# --- the CUDA version of a driver branch ---------------------------------------------------------
def test_595_reports_cuda_13_2_and_a_cuda_13_1_image_runs(run_fixture: RunFixture) -> None:
    state = state_of("el9-l40s-r595-cuda13.2")
    ver = check_of(state, "driver.version")
    assert "CUDA 13.2 (nvidia-smi and the branch table agree)" in ver.message
    fake = FakeHost(Fixture.load_fixture("el9-l40s-r595-cuda13.2"))
    ctx = FleetInputs(UpgradePlan(), TODAY, [require("cuda>=13.1", "13.1.0")], [], False)
    report = preflight_host(Target("h", "fake://h"), ctx, lambda _: ReadOnlyHost(fake, "h"))
    (row,) = report.rows
    assert row.now.status == "ok", row.now.reasons
    # and on the branch table alone (no host): 590 -> 13.1, 595 -> 13.2, R510 -> 11.6
    for driver, ok in (("590.48.01", True), ("580.65.06", False), ("595.71.05", True)):
        v = judge_image(require("cuda>=13.1", "13.1.0"), DriverVersion(driver))
        assert (v.status == "ok") is ok, (driver, v)


def test_nvidia_smi_disagreeing_with_the_table_is_flagged_and_wins() -> None:
    state = state_of("el9-l40s-r595-cuda13.2")
    assert state.smi_q is not None
    state.smi_q = dataclasses.replace(state.smi_q, cuda="13.3")
    ver = check_of(state, "driver.version")
    assert (
        ver.severity is WARN
        and "nvidia-smi reports CUDA 13.3 but the branch table says 13.2" in (ver.message)
    )


def test_a_branch_past_the_table_is_unknown_not_the_last_known_cuda() -> None:
    v = judge_image(require("cuda>=13.1", "13.1.0"), DriverVersion("640.10.01"))
    assert v.status == "unknown" and any("not known to the rules" in r for r in v.reasons)
    # with the host's own banner it is judged
    ok = judge_image(require("cuda>=13.1", "13.1.0"), DriverVersion("640.10.01"), Version("13.4"))
    assert ok.status == "ok"


# --- GPUs the driver does not drive --------------------------------------------------------------
def test_a_gpu_on_pci_that_nvml_lacks_is_in_the_inventory_with_its_reason() -> None:
    state = state_of("el9-l40s-rtx5090-r565")
    names = [(g.name, g.source) for g in state.gpus]
    assert ("NVIDIA GeForce RTX 5090", "lspci") in names
    inv = check_of(state, "gpu.inventory")
    assert inv.severity is BLOCK
    assert "seen on PCI only (not in NVML): NVIDIA GeForce RTX 5090" in inv.message
    assert "does not drive it" in inv.message and "needs driver branch R570+" in inv.message
    assert inv.reason == "gpu.branch-too-old"
    after = check_of(state, "gpu.inventory", UpgradePlan(DriverVersion("570.124.06")))
    assert after.severity is WARN and "must bring them up" in after.remediation


def test_vfio_bound_and_fallen_off_the_bus_gpus_say_so() -> None:
    state = state_of("el9-l40s-rtx5090-r565")
    assert state.pci is not None
    text = state.outputs["lspci"].stdout.replace(
        "Kernel modules: nvidiafb", "Kernel driver in use: vfio-pci\n\tKernel modules: nvidiafb"
    )
    from builder.host import parsers
    from builder.preflight.host_gpus import HostGpu, merged_gpus

    def merged(pci: parsers.PciDevices) -> list[HostGpu]:
        smi_q = state.smi_q.gpus if state.smi_q else ()
        return merged_gpus(state.smi_gpus, smi_q, pci, state.nvidia_loaded)

    (g,) = [g for g in merged(parsers.lspci_nvidia(text)) if g.source == "lspci"]
    assert "vfio-pci" in g.pci_note
    text = text.replace("(rev a1)\n\tSubsystem", "(rev ff)\n\tSubsystem")
    (g,) = [g for g in merged(parsers.lspci_nvidia(text)) if g.source == "lspci"]
    assert "fallen off the bus" in g.pci_note


# --- upgraded but not rebooted -------------------------------------------------------------------
def test_reboot_pending_is_said_and_no_harmful_fix_is_given(run_fixture: RunFixture) -> None:
    report, _ = run_fixture("el9-h100-reboot-pending")
    ver = check(report, "driver.version")
    assert ver.severity is WARN and "reboot pending" in ver.message
    assert "550.144.03" in ver.message and "after the reboot 570.124.06 runs" in ver.message
    assert "reboot into 570.124.06" in ver.remediation
    assert check(report, "kernel.devel").severity is OK
    assert (
        check(report, "dkms.nvidia").severity is OK
        and "570.124.06" in check(report, "dkms.nvidia").message
    )
    cdi = check(report, "cdi.spec")
    assert cdi.severity is OK and "right for the driver after the pending reboot" in cdi.message
    fm = check(report, "fabricmanager")
    assert fm.severity is WARN and "after the pending reboot" in fm.message
    assert not any(
        "kernel-devel" in c.remediation or "cdi generate" in c.remediation for c in report.checks
    )
    assert report.facts["reboot_pending"] is True
    assert report.facts["driver_installed"] == "570.124.06"


# --- end of life ---------------------------------------------------------------------------------
def test_an_unlisted_branch_is_out_of_support_and_strict_blocks() -> None:
    state = state_of("el9-h100")  # R550
    ver = check_of(state, "driver.version")
    assert ver.severity is WARN and "R550 is not in NVIDIA's driver lifecycle table" in ver.message
    strict = check_of(state, "driver.version", UpgradePlan(strict=True))
    assert strict.severity is BLOCK
    target = check_of(state, "driver.target", UpgradePlan(DriverVersion("570.124.06")))
    assert "R570 (PB) reached end of life on 2026-02-28" in target.message
    assert target.severity is WARN
    assert (
        check_of(
            state, "driver.target", UpgradePlan(DriverVersion("570.124.06"), strict=True)
        ).severity
        is BLOCK
    )
    ahead = check_of(state, "driver.target", UpgradePlan(DriverVersion("595.71.05")))
    assert "reaches end of life on 2027-03-31" in ahead.message and ahead.severity is WARN
    fine = check_of(state, "driver.target", UpgradePlan(DriverVersion("580.65.06")))
    assert fine.severity is OK and "supported until 2028-06-30" in fine.message


# --- one odd input never collapses a report ------------------------------------------------------
def test_a_cdi_spec_with_scalar_args_is_its_own_finding(run_fixture: RunFixture) -> None:
    report, _ = run_fixture("el9-l40s-cdi-args-scalar")
    cdi = check(report, "cdi.spec")
    assert cdi.severity is BLOCK and "hooks[0].args is 1, not a list" in cdi.message
    assert "nvidia-ctk cdi generate" in cdi.remediation
    assert check(report, "host.reach").severity is OK
    assert len(report.checks) == len(checks.CHECK_IDS)


def test_an_exception_in_a_probe_step_or_a_check_stays_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from builder.host import parsers

    monkeypatch.delenv("TRAINIMG_DEBUG", raising=False)

    def boom(*_: object) -> object:
        raise TypeError("'int' object is not iterable")

    monkeypatch.setattr(parsers, "cdi_spec", boom)
    state = state_of("el9-h100")
    assert "cdi" in state.errors and state.podman_version is not None  # later steps still ran
    cdi = check_of(state, "cdi.spec")
    assert cdi.severity is WARN and "TypeError" in cdi.message and "cdi:" in cdi.message
    host_os = checks.HOST_CHECKS[0]
    assert host_os.id == "host.os"
    monkeypatch.setattr(checks, "HOST_CHECKS", (replace(host_os, fn=boom), *checks.HOST_CHECKS[1:]))
    got = {c.id: c for c in checks.run_checks(state, UpgradePlan(), TODAY)}
    assert got["host.os"].severity is WARN and "TypeError" in got["host.os"].message
    assert got["driver.version"].severity is not None  # the others ran
    monkeypatch.setenv("TRAINIMG_DEBUG", "1")
    with pytest.raises(TypeError):
        checks.run_checks(state, UpgradePlan(), TODAY)


def check_of(state: HostState, cid: str, plan: UpgradePlan | None = None) -> Finding:
    return next(c for c in checks.run_checks(state, plan or UpgradePlan(), TODAY) if c.id == cid)


def test_exit_codes_of_the_defect_fixtures(run_fixture: RunFixture) -> None:
    for name in ("el9-h100-reboot-pending", "el9-l40s-rtx5090-r565", "debian12-rpm-installed"):
        report, fake = run_fixture(name)
        assert exit_code([report]) == fake.fixture.expect["exit"], name
    assert isinstance(TODAY, dt.date)


# --- the text report says what JSON says; MIG ----------------------------------------------------
def test_the_text_report_carries_every_remediation_json_has(run_fixture: RunFixture) -> None:
    from builder.preflight.report import as_json, render_fleet

    report, _ = run_fixture("el9-h100", "570.124.06")
    text = render_fleet([report], "570.124.06", verbose=True, wide=True)
    for c in as_json([report], "570.124.06")["hosts"][0]["checks"]:
        if c["remediation"]:
            assert c["remediation"] in text, c["id"]
    assert "upgrade it with the driver, in the same transaction, to exactly 570.124.06" in text


def test_mig_enabled_gpus_are_reported_with_what_the_reload_does() -> None:
    state = state_of("el9-h100")
    assert state.smi_q is not None
    gpus = tuple(
        dataclasses.replace(g, mig_current="Enabled", mig_pending="Enabled")
        for g in state.smi_q.gpus
    )
    state.smi_q = dataclasses.replace(state.smi_q, gpus=gpus)
    mig = check_of(state, "gpu.mig", UpgradePlan(DriverVersion("570.124.06")))
    assert mig.severity is WARN and "MIG is enabled on 8 of 8 GPU(s)" in mig.message
    assert "do not survive the driver reload" in mig.message and "mig-parted" in mig.remediation
    assert check_of(state, "gpu.mig").severity is OK  # without a plan it is a note


PROC_MODULES = """\
gdrdrv 24576 0 - Live 0x0000000000000000 (OE)
nvidia_peermem 16384 0 - Live 0x0000000000000000 (POE)
nvidia_uvm 1540096 0 - Live 0x0000000000000000 (POE)
nvidia_drm 94208 0 - Live 0x0000000000000000 (POE)
nvidia_modeset 1306624 1 nvidia_drm, Live 0x0000000000000000 (POE)
nvidia 54718464 3 gdrdrv,nvidia_peermem,nvidia_uvm,nvidia_modeset, Live 0x0000000000000000 (POE)
ib_core 462848 1 nvidia_peermem, Live 0x0000000000000000
"""  # /proc/modules layout (proc(5): name size refcount users state address taint)


def test_modules_that_pin_the_driver_are_named() -> None:
    from builder.host import parsers

    state = state_of("el9-h100")
    state.modules = parsers.proc_modules(PROC_MODULES)
    dep = check_of(state, "driver.dependents", UpgradePlan(DriverVersion("570.124.06")))
    assert dep.severity is WARN
    assert "gdrdrv: GDRCopy" in dep.message and "nvidia_peermem" in dep.message
    assert "nvidia_uvm" not in dep.message  # NVIDIA's own stack is not a dependent
    state.modules = parsers.proc_modules(
        "\n".join(
            line
            for line in PROC_MODULES.splitlines()
            if not line.startswith(("gdrdrv ", "nvidia_peermem ", "ib_core "))
        ).replace("gdrdrv,nvidia_peermem,", "")
    )
    assert check_of(state, "driver.dependents").severity is OK


def test_xid_runfile_and_dnf_pins(run_fixture: RunFixture) -> None:
    report, _ = run_fixture("el9-h100-xid-pinned", "580.65.06")
    xid = check(report, "gpu.xid")
    assert (  # a GPU off the bus blocks the plan too: no driver brings it back
        xid.severity is BLOCK
        and "Xid 79 x1 on 0000:9a:00 (GPU has fallen off the bus)" in xid.message
    )
    assert "dcgmi diag" in xid.remediation
    run = check(report, "driver.runfile")
    assert run.severity is WARN and "/usr/bin/nvidia-uninstall" in run.message
    assert "also installed from packages" in run.message and "nvidia-uninstall" in run.remediation
    pins = check(report, "packages.pins")
    assert pins.severity is BLOCK  # with a target the lock stops the upgrade
    assert "nvidia-driver-3:550.144.03-1.el9.*" in pins.message and "podman" not in pins.message
    assert "versionlock delete" in pins.remediation
    clean, _ = run_fixture("el9-h100")
    assert check(clean, "gpu.xid").severity.value == "skip"  # no journalctl recorded there
    assert check(clean, "packages.pins").severity is OK
