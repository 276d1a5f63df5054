"""The verdict an admin gates an upgrade on: each finding's kind (breaks, broken-now, never-ran,
risk, info; builder/judgement/kind.py), the exit code of the worst kind `--fail-on` counts, and
one recorded host per row of the exit-code table (tests/preflight/fixtures, edited in memory
where a fault has no recording of its own: each edit says what it stands for)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from builder.cli import main
from builder.judgement.kind import (
    BREAKS,
    BROKEN_NOW,
    EXIT_TABLE,
    INFO,
    NEVER_RAN,
    RISK,
    Kind,
    exit_code_of_kinds,
    kind_of,
    parse_fail_on,
)
from builder.judgement.severity import BLOCK, OK, SKIP, WARN, Severity
from builder.preflight import images as img
from builder.preflight.exit_gate import exit_table_help
from builder.preflight.fleet import judge_state
from builder.preflight.gather import gather
from builder.preflight.host_gpus import OFF_THE_BUS
from builder.preflight.hostio import ReadOnlyHost
from builder.preflight.report import HostReport, exit_code, summary_lines
from tests.preflight.conftest import PREFLIGHT_MATRIX, REPO, TODAY, context
from tests.preflight.fakehost import FIXTURES, SHORT, FakeHost, Fixture

Sev = Severity | None


@pytest.mark.parametrize(
    ("now", "plan", "planned", "same", "image", "want"),
    [
        (OK, None, False, True, False, INFO),
        (SKIP, None, False, True, False, INFO),
        (WARN, None, False, True, False, RISK),
        (BLOCK, None, False, True, False, BROKEN_NOW),  # no plan: nothing can break
        (BLOCK, None, False, True, True, NEVER_RAN),
        (OK, BLOCK, True, True, False, BREAKS),
        (None, BLOCK, True, True, False, BREAKS),  # a target check, not judged now
        (WARN, BLOCK, True, True, False, BREAKS),
        (BLOCK, BLOCK, True, True, False, BROKEN_NOW),
        (BLOCK, BLOCK, True, False, False, BREAKS),  # blocks now for another reason
        (BLOCK, WARN, True, True, False, RISK),  # the plan replaces what failed
        (BLOCK, OK, True, True, False, INFO),  # the plan repairs it
        (BLOCK, BLOCK, True, False, True, NEVER_RAN),  # an image: any reason, never ran
        (None, BLOCK, True, True, True, NEVER_RAN),  # no driver now: it never ran here
        (OK, BLOCK, True, True, True, BREAKS),
        (WARN, BLOCK, True, True, True, BREAKS),
    ],
)
def test_a_findings_kind_follows_from_its_now_and_plan_severities(
    now: Sev, plan: Sev, planned: bool, same: bool, image: bool, want: Kind
) -> None:
    assert kind_of(now, plan, planned=planned, same_reason=same, image=image) is want


def test_the_worst_counted_kind_decides_the_exit_code() -> None:
    assert exit_code_of_kinds([INFO, RISK, NEVER_RAN, BREAKS]) == 1
    assert exit_code_of_kinds([RISK, BROKEN_NOW, NEVER_RAN]) == 4
    assert exit_code_of_kinds([INFO, RISK]) == 3
    assert exit_code_of_kinds([INFO]) == exit_code_of_kinds([]) == 0
    assert exit_code_of_kinds([RISK, BROKEN_NOW, BREAKS], frozenset({RISK})) == 3
    assert exit_code_of_kinds([RISK, BROKEN_NOW], frozenset({BREAKS})) == 0
    assert parse_fail_on(" breaks,never-ran ") == frozenset({BREAKS, NEVER_RAN})
    bad_lists = (("", "a comma list"), ("breaks,", "a comma list"),
                 ("info", "info never fails"), ("break", "'break' is not a kind"))  # fmt: skip
    for bad, says in bad_lists:
        with pytest.raises(ValueError, match=says):
            parse_fail_on(bad)


def test_the_exit_table_is_in_the_docs_and_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    docs = " ".join((REPO / "docs" / "preflight.md").read_text().split())
    for code, text in EXIT_TABLE:
        assert f"| {code} | {text} |" in docs, code
    with pytest.raises(SystemExit):
        main(["preflight", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert " ".join(exit_table_help().split()) in out
    assert all(f"{code} {' '.join(text.split())}" in out for code, text in EXIT_TABLE)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["preflight", "--matrix", str(PREFLIGHT_MATRIX), "--today", str(TODAY),
                 "--json", *args])  # fmt: skip
    out, _ = capsys.readouterr()
    return code, json.loads(out)


def kinds_of(doc: dict[str, Any]) -> dict[str, str]:
    (host,) = doc["hosts"]
    return {c["id"]: c["kind"] for c in host["checks"]}


V100 = str(FIXTURES / "el9-v100-r535")


def test_row_0_and_row_1_a_v100_plan_that_keeps_it_and_one_that_drops_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, doc = cli(capsys, "--from", V100, "--no-images", "--target-driver", "580.65.06")
    assert code == doc["exit_code"] == 0 and set(kinds_of(doc).values()) == {"info"}
    assert doc["schema"] == 3 and doc["hosts"][0]["kind"] == "info"
    code, doc = cli(capsys, "--from", V100, "--no-images", "--target-driver", "595.71.05",
                    "--target-module", "open")  # fmt: skip
    kinds = kinds_of(doc)
    assert code == 1 and kinds["driver.target"] == kinds["driver.module"] == "breaks"
    (host,) = doc["hosts"]
    assert host["blocking"] == {"breaks": ["gpu.branch-dropped", "gpu.open-unsupported"]}
    assert host["top"]["kind"] == "breaks"
    # --fail-on chooses: a gate on breaks alone still stops this plan
    assert main(["preflight", "--matrix", str(PREFLIGHT_MATRIX), "--today", str(TODAY), "--from",
                 V100, "--no-images", "--target-driver", "595.71.05", "--target-module", "open",
                 "--fail-on", "broken-now,never-ran"]) == 0  # fmt: skip
    line = capsys.readouterr().out.splitlines()[0]
    assert "breaks gpu.branch-dropped, gpu.open-unsupported" in line  # every blocking reason


def test_row_4_never_ran_a_v100_with_torch_cells_that_carry_no_sm_70(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The torch 2.11 cells were built without sm_70: they never ran on this V100 and the R580
    plan does not change that (exit 4, not 1); `--fail-on breaks` lets the plan through."""
    code, doc = cli(capsys, "--from", V100, "--target-driver", "580.65.06")
    (host,) = doc["hosts"]
    assert kinds_of(doc)["images.impact"] == "never-ran" and code == 4
    rows = [r for r in host["images"] if r["kind"] == "never-ran"]
    assert rows and all(r["change"] == "unchanged" for r in rows)
    assert "image.no-kernel-image" in host["blocking"]["never-ran"]
    assert "breaks" not in host["blocking"]
    code, _ = cli(capsys, "--from", V100, "--target-driver", "580.65.06", "--fail-on", "breaks")
    assert code == 0


def test_row_4_broken_now_a_gpu_fallen_off_the_bus(capsys: pytest.CaptureFixture[str]) -> None:
    """Xid 79 this boot: broken now with or without a plan (exit 4 without one); with the
    plan, the versionlock pin the plan trips over is what it breaks (exit 1)."""
    rec = str(FIXTURES / "el9-h100-xid-pinned")
    code, doc = cli(capsys, "--from", rec, "--no-images")
    assert code == 4 and kinds_of(doc)["gpu.xid"] == "broken-now"
    code, doc = cli(capsys, "--from", rec, "--no-images", "--target-driver", "580.65.06")
    kinds = kinds_of(doc)
    assert kinds["gpu.xid"] == "broken-now" and kinds["packages.pins"] == "breaks" and code == 1
    code, _ = cli(capsys, "--from", rec, "--no-images", "--target-driver", "580.65.06",
                  "--fail-on", "broken-now")  # fmt: skip
    assert code == 4


def test_row_3_risk_only_a_healthy_debian_host(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = cli(capsys, "--from", str(FIXTURES / "debian12-l40s-healthy"), "--no-images",
                    "--target-driver", "580.65.06")  # fmt: skip
    assert code == 3 and "risk" in kinds_of(doc).values()
    assert not {"breaks", "broken-now", "never-ran"} & set(kinds_of(doc).values())


def test_row_2_a_bad_fail_on_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["preflight", "--from", V100, "--fail-on", "breaks,oops"])
    _, err = capsys.readouterr()
    assert stop.value.code == 2 and "'oops' is not a kind" in err and "Traceback" not in err
    assert "breaks, broken-now, never-ran, risk" in err


def _judged(fx: Fixture, target: str | None, images: list[img.ImageRecord]) -> HostReport:
    state = gather(ReadOnlyHost(FakeHost(fx), fx.name))
    return judge_state(state, context(images, target))


def _with(name: str, argv: tuple[str, ...], **change: Any) -> Fixture:
    """A fixture whose recording of `argv` is changed (the rest as recorded)."""
    fx = Fixture.load_fixture(name)
    fx.recordings = [dataclasses.replace(r, **change) if r.argv == argv else r
                     for r in fx.recordings]  # fmt: skip
    return fx


SMI = SHORT["smi"]  # nvidia-smi --query-gpu=... --format=csv,noheader


@pytest.mark.parametrize(
    ("change", "says"),
    [  # nvidia-smi under the probe's `timeout` (exit 124), and a GPU NVML lost (exit 15)
        ({"stdout": "", "rc": 124}, "timed out"),
        ({"stdout": "Unable to determine the device handle for GPU 0000:9A:00.0: GPU is lost. "
                    "Reboot the system to recover this GPU\n", "rc": 15}, "fallen off the bus"),
    ],
)  # fmt: skip
def test_a_hung_nvidia_smi_or_a_lost_gpu_is_broken_now_not_a_warning(
    change: dict[str, Any], says: str
) -> None:
    report = _judged(_with("el9-h100", SMI, **change), "580.65.06", [])
    ver = next(c for c in report.checks if c.id == "driver.version")
    assert ver.severity is BLOCK and says in ver.message, ver.message
    assert report.kinds()[report.checks.index(ver)] is BROKEN_NOW
    assert exit_code([report]) == 4 and report.top is not None and report.top.id == ver.id
    # the driver's own nvidia-smi failure (B200 on the proprietary module) is repaired by the
    # open R580 plan: a risk there, not broken now
    b200 = _judged(Fixture.load_fixture("el9-b200-proprietary"), "580.65.06", [])
    b200_ver = next(c for c in b200.checks if c.id == "driver.version")
    assert b200_ver.severity is WARN and b200.kinds()[b200.checks.index(b200_ver)] is RISK


def test_a_gpu_lspci_reads_as_rev_ff_is_broken_now() -> None:
    """One of the H100s is on PCI only with config space all ones (lspci `(rev ff)`): gone
    until a reboot, whatever the plan (was: a warning that the upgrade must bring it up)."""
    state = gather(ReadOnlyHost(FakeHost(Fixture.load_fixture("el9-h100")), "h"))
    state.gpus[0] = dataclasses.replace(state.gpus[0], source="lspci", pci_note=OFF_THE_BUS)
    report = judge_state(state, context([], "580.65.06"))
    inv = next(c for c in report.checks if c.id == "gpu.inventory")
    assert inv.severity is BLOCK and "fallen off the bus" in inv.message
    assert report.kinds()[report.checks.index(inv)] is BROKEN_NOW and "reboot" in inv.remediation


def test_a_failed_fabric_manager_of_the_drivers_version_is_broken_now() -> None:
    fx = Fixture.load_fixture("el9-h100")
    unit = next(r for r in fx.recordings if r.argv == SHORT["systemctl"])
    failed = unit.stdout.replace(
        "Id=nvidia-fabricmanager.service\nLoadState=loaded\nActiveState=active",
        "Id=nvidia-fabricmanager.service\nLoadState=loaded\nActiveState=failed",
    )
    assert failed != unit.stdout
    report = _judged(_with("el9-h100", unit.argv, stdout=failed), "580.65.06", [])
    got = next(c for c in report.checks if c.id == "fabricmanager")
    assert got.severity is BLOCK and "journalctl -u nvidia-fabricmanager" in got.remediation
    assert report.kinds()[report.checks.index(got)] is BROKEN_NOW
    # one version behind the driver (el9-h200-fm-mismatch): the plan replaces it, a risk
    h200 = _judged(Fixture.load_fixture("el9-h200-fm-mismatch"), "580.65.06", [])
    fm_h200 = next(c for c in h200.checks if c.id == "fabricmanager")
    assert fm_h200.severity is WARN


def test_a_pending_mig_mode_change_is_a_risk_now_and_what_the_plan_breaks() -> None:
    state = gather(ReadOnlyHost(FakeHost(Fixture.load_fixture("el9-h100")), "h"))
    assert state.smi_q is not None  # `nvidia-smi -q` of a GPU whose MIG Pending is Enabled
    gpus = (dataclasses.replace(state.smi_q.gpus[0], mig_pending="Enabled"),
            *state.smi_q.gpus[1:])  # fmt: skip
    state.smi_q = dataclasses.replace(state.smi_q, gpus=gpus)
    report = judge_state(state, context([], "580.65.06"))
    mig = next(c for c in report.checks if c.id == "gpu.mig")
    now = next(c for c in report.now_checks or () if c.id == "gpu.mig")
    assert now.severity is WARN and mig.severity is BLOCK
    assert report.kinds()[report.checks.index(mig)] is BREAKS and exit_code([report]) == 1
    assert "the upgrade's GPU reset applies it" in mig.message
    assert "gpu.mig" in summary_lines(report, 8)[0]


@pytest.mark.parametrize(
    ("driver", "code", "kind"), [("580.65.06", 1, "breaks"), ("595.71.05", 0, "info")]
)
def test_compat_has_no_now_a_block_is_what_the_move_breaks(
    capsys: pytest.CaptureFixture[str], driver: str, code: int, kind: str
) -> None:
    """`trainimg compat` judges a driver and GPU an image would move to: a block is breaks (1),
    never broken-now or never-ran, which need a host as it is."""
    got = main(["compat", "--matrix", str(PREFLIGHT_MATRIX), "--today", "2025-06-01", "--require",
                "cuda>=13.1", "--driver", driver, "--json"])  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert got == doc["exit_code"] == code and doc["verdict"]["kind"] == kind
    assert doc["kind"] == "trainimg.compat"  # the envelope's, not the finding kind
