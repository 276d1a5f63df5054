"""Preflight as a fleet-upgrade gate: recorded hosts judged right - no false pass
(a host would lose its GPUs), no false block (an admin learns to ignore exit 1) - and a plan
that repairs a host passes. The hosts are records under tests/preflight/fixtures, each with
its origin and what was derived noted in its fixture.yaml."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from builder.cli import main
from builder.host.parsers import cdi_spec
from builder.judgement.severity import BLOCK, OK, WARN
from builder.preflight import checks
from builder.preflight.gather import gather
from builder.preflight.hostio import ReadOnlyHost
from builder.preflight.model import UpgradePlan
from builder.preflight.report import HostReport, render_fleet
from tests.preflight.conftest import PREFLIGHT_MATRIX, TODAY, RunFixture, check
from tests.preflight.fakehost import FIXTURES, FakeHost, Fixture


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["preflight", "--matrix", str(PREFLIGHT_MATRIX), "--today", str(TODAY),
                 "--json", *args])  # fmt: skip
    out, _ = capsys.readouterr()
    return code, json.loads(out)


def host_of(doc: dict[str, Any]) -> dict[str, Any]:
    (host,) = doc["hosts"]
    assert isinstance(host, dict)
    return host


def by_id(host: dict[str, Any], key: str = "checks") -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in host[key]}


def test_volta_with_an_open_or_too_new_target_blocks(capsys: pytest.CaptureFixture[str]) -> None:
    """8x V100 on 535 -> 595 with open modules: Volta ends with R580 and never had the open
    modules (it was only a lifecycle warning); R580 proprietary is the plan that works."""
    rec = str(FIXTURES / "el9-v100-r535")
    code, doc = cli(capsys, "--from", rec, "--no-images", "--target-driver", "595.71.05",
                    "--target-module", "open")  # fmt: skip
    checks_ = by_id(host_of(doc))
    assert code == 1
    assert checks_["driver.target"]["severity"] == "block"
    assert checks_["driver.target"]["reason"] == "gpu.branch-dropped"
    assert checks_["driver.module"]["reason"] == "gpu.open-unsupported"
    code, doc = cli(capsys, "--from", rec, "--no-images", "--target-driver", "580.65.06",
                    "--target-module", "open")  # fmt: skip
    assert code == 1 and by_id(host_of(doc))["driver.module"]["severity"] == "block"
    code, doc = cli(capsys, "--from", rec, "--no-images", "--target-driver", "580.65.06")
    host = host_of(doc)
    assert by_id(host)["driver.module"]["severity"] == "ok"  # proprietary, as now
    assert by_id(host)["driver.target"]["severity"] == "ok" and code == 0


def test_a_b200_lspci_cannot_name_is_judged_by_its_pci_id(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`NVIDIA Corporation Device [10de:2901]` is a B200: a proprietary plan blocks for the
    module flavour; the open R580 plan repairs the host and passes the gate."""
    rec = str(FIXTURES / "el9-b200-unnamed-pci")
    code, doc = cli(capsys, "--from", rec, "--target-driver", "570.124.06", "--target-module",
                    "proprietary")  # fmt: skip
    host = host_of(doc)
    assert by_id(host)["driver.module"]["reason"] == "gpu.needs-open-modules"
    assert code == 4 and by_id(host)["driver.module"]["kind"] == "broken-now"  # as now: kept
    gpus = host["facts"]["gpu_list"]
    assert {g["catalogue"] for g in gpus} == {"b200"}
    assert {g["identified_by"] for g in gpus} == {"PCI id 10de:2901"}
    code, doc = cli(capsys, "--from", rec, "--target-driver", "580.65.06", "--target-module",
                    "open")  # fmt: skip
    host = host_of(doc)
    assert host["verdicts"] == {"now": "block", "plan": "warn"}
    assert code == 3 and doc["exit_code"] == 3  # the plan repairs the host: the gate passes
    assert by_id(host, "now_checks")["driver.module"]["severity"] == "block"
    impact = by_id(host)["images.impact"]
    assert impact["severity"] in ("ok", "warn")


def test_a_healthy_debian_gpu_host_is_not_blocked(run_fixture: RunFixture) -> None:
    report, fake = run_fixture("debian12-l40s-healthy")
    assert report.verdict is WARN and fake.fixture.expect["exit"] == 3
    dkms = check(report, "dkms.nvidia")
    assert dkms.severity is OK and "nvidia-current/535.216.03 installed (DKMS)" in dkms.message
    assert not any("kernel-devel" in c.remediation or "dnf " in c.remediation
                   for c in report.checks)  # fmt: skip
    planned, _ = run_fixture("debian12-l40s-healthy", "580.65.06")
    dkms = check(planned, "dkms.nvidia")
    assert dkms.severity is OK and "linux-headers-6.1.0-28-amd64" in dkms.message


def test_a_cdi_spec_shadowed_by_directory_priority_is_not_blocked(run_fixture: RunFixture) -> None:
    report, _ = run_fixture("el9-h100-cdi-shadowed")
    cdi = check(report, "cdi.spec")
    assert cdi.severity is OK and "/etc/cdi/nvidia.yaml is shadowed" in cdi.message
    # the shadowed copy may even be stale: CDI never reads it while /var/run/cdi holds the kind
    state = gather(ReadOnlyHost(FakeHost(Fixture.load_fixture("el9-h100-cdi-shadowed")), "h"))
    stale = [replace(s, driver_version=None) if s.path.startswith("/var") else s
             for s in state.cdi_specs]  # fmt: skip
    old = cdi_spec("/etc/cdi/nvidia.yaml", state.outputs["cat /etc/cdi/nvidia.yaml"].stdout
                   .replace("550.144.03", "535.216.03"))  # fmt: skip
    assert not isinstance(old, str)
    state.cdi_specs = [old, *(s for s in stale if s.path.startswith("/var"))]
    got = checks.run_one(next(r for r in checks.HOST_CHECKS if r.id == "cdi.spec"), state,
                         UpgradePlan(), TODAY)  # fmt: skip
    assert got.severity is OK, got.message
    # two specs of one kind in one directory declaring the same device do conflict
    state.cdi_specs = [replace(old, path="/etc/cdi/a.yaml"), replace(old, path="/etc/cdi/b.yaml")]
    got = checks.run_one(next(r for r in checks.HOST_CHECKS if r.id == "cdi.spec"), state,
                         UpgradePlan(), TODAY)  # fmt: skip
    assert got.severity is BLOCK and "at the same priority" in got.message


def test_a_stale_runtime_spec_on_a_reboot_pending_host_is_rewritten_at_boot(
    run_fixture: RunFixture,
) -> None:
    """/var/run/cdi is cleared at boot and nvidia-cdi-refresh writes it anew: a spec there for
    the old driver is no block on a host waiting for its reboot."""
    state = gather(ReadOnlyHost(FakeHost(Fixture.load_fixture("el9-h100-reboot-pending")), "h"))
    spec = state.cdi_specs[0]
    moved = replace(spec, path="/var/run/cdi/nvidia.yaml", driver_version=state.loaded_driver)
    state.cdi_specs = [moved]
    state.cdi_missing = {moved.path: list(moved.host_paths[:1])}
    state.units["nvidia-cdi-refresh.path"] = ("active", "enabled")
    got = checks.run_one(next(r for r in checks.HOST_CHECKS if r.id == "cdi.spec"), state,
                         UpgradePlan(), TODAY)  # fmt: skip
    assert got.severity is OK and "cleared at the pending reboot" in got.message
    state.units["nvidia-cdi-refresh.path"] = ("inactive", "disabled")
    got = checks.run_one(next(r for r in checks.HOST_CHECKS if r.id == "cdi.spec"), state,
                         UpgradePlan(), TODAY)  # fmt: skip
    assert got.severity is WARN and "nothing rewrites it" in got.message
    assert "systemctl" not in got.remediation and "--output=/var/run/cdi/nvidia.yaml" in (
        got.remediation
    )


def test_secure_boot_on_precompiled_kmods_does_not_block_every_target(
    run_fixture: RunFixture,
) -> None:
    report, _ = run_fixture("el9-h100-secureboot-kmods", "580.65.06")
    dkms = check(report, "dkms.nvidia")
    assert dkms.severity is OK and "the upgrade installs the kmod-nvidia package" in dkms.message
    assert check(report, "secureboot.mok").severity is WARN
    assert report.verdict is WARN


def test_reboot_pending_and_another_target_blocks(run_fixture: RunFixture) -> None:
    same, _ = run_fixture("el9-h100-reboot-pending", "570.124.06")
    assert check(same, "driver.version").severity is WARN
    other, _ = run_fixture("el9-h100-reboot-pending", "580.65.06")
    ver = check(other, "driver.version")
    assert ver.severity is BLOCK and "reboot into 570.124.06 first" in ver.remediation


def test_r620_runs_cu128_images_and_does_not_degrade_them(run_fixture: RunFixture) -> None:
    report, _ = run_fixture("el9-h100", "620.10.01")
    rows = [r for r in report.rows if r.image.cuda]
    assert rows and all(r.after is not None and r.after.status == "ok" for r in rows)
    assert {r.change for r in rows} == {"improves"}
    assert check(report, "driver.target").severity is OK  # LTSB to 2029, open modules


def test_the_fleet_report_is_the_summary_first_then_a_line_per_host_worst_first(
    run_fixture: RunFixture,
) -> None:
    reports: list[HostReport] = [run_fixture(n, "580.65.06")[0]
                                 for n in ("el9-h100", "el9-geforce", "el9-v100-r535")]  # fmt: skip
    healthy = replace(reports[0], checks=[c for c in reports[0].checks if c.severity.rank <= 1])
    twin = replace(reports[2], host="el9-v100-twin")  # the same reason and fix: one group
    text = render_fleet([healthy, *reports, twin], "580.65.06")
    lines = text.splitlines()
    count = lines[0]
    assert count.startswith("5 host(s): ") and count == lines[-1]  # first, and last for tail -1
    assert count.endswith("target 580.65.06 (the plan's verdict decides)")
    v100 = reports[2].top
    assert v100 is not None and v100.severity is BLOCK
    group = next(i for i, line in enumerate(lines) if f"  {v100.code}  " in line)
    assert (
        lines[group].startswith("block ")
        and "2 host(s): el9-v100-r535, el9-v100-twin" in (lines[group])
    )
    # each group's fix once, whole (no word cut); a host line carries no fix
    fix = " ".join(v100.remediation.split())
    assert " ".join(text.split()).count(fix) == 1
    for r in reports:
        top = r.top
        if top is not None and top.remediation:
            assert " ".join(top.remediation.split()) in " ".join(text.split())
    assert not any(line.rstrip().endswith("...") and "fix:" in line for line in lines)
    host_lines = [line for line in lines if line.startswith(("el9-", healthy.host))]
    hosts = [line.split()[0] for line in host_lines]
    assert hosts[:2] == ["el9-v100-r535", "el9-v100-twin"]  # worst first, input order kept
    assert hosts[-1] == healthy.host and "nothing to fix" in host_lines[-1]
    at = [i for i, line in enumerate(lines) if line in host_lines]
    assert not any(lines[i + 1].lstrip().startswith("fix:") for i in at)
    assert "hosts per reason: " in text
    single = render_fleet([reports[2]], "580.65.06").splitlines()  # one host: its line and fix
    assert single[0].startswith("el9-v100-r535") and "fix: " in single[1]
    verbose = render_fleet(reports, "580.65.06", verbose=True)
    assert verbose.count("== ") == 3 and "IMAGE" in verbose


def test_a_b200_without_lspci_is_seen_in_sysfs_and_a_proprietary_plan_blocks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """No lspci, no NVML device: /sys/bus/pci/devices is the only witness. Its 8 B200s (class
    0x0302, 10de:2901) are identified by PCI id, so keeping the proprietary modules blocks; the
    NVSwitches (0x0680) and the Intel host bridge are not GPUs. The same record without its
    sysfs files passes the plan (exit 3): the defect of issue 28."""
    rec = FIXTURES / "el9-b200-proprietary-no-lspci"
    args = ("--target-driver", "580.65.06", "--target-module", "proprietary")
    code, doc = cli(capsys, "--from", str(rec), *args)
    host = host_of(doc)
    assert code == 4 and by_id(host)["driver.module"]["reason"] == "gpu.needs-open-modules"
    gpus = host["facts"]["gpu_list"]
    assert len(gpus) == 8 and {g["catalogue"] for g in gpus} == {"b200"}
    assert {g["identified_by"] for g in gpus} == {"PCI id 10de:2901"}
    blind = tmp_path / "no-sysfs"
    shutil.copytree(rec, blind)
    shutil.rmtree(blind / "files" / "sys" / "bus")
    code, doc = cli(capsys, "--from", str(blind), *args)
    assert code == 3 and host_of(doc)["facts"]["gpu_list"] == []
