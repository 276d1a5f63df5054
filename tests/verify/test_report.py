"""The suite and its reports, run against this machine through testinfra's local:// backend
(no container): a mixed result of passed, failed, skipped and errored checks, and how the
summary, the JSON and the JUnit XML show it."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from builder.judgement.finding import Finding
from builder.judgement.registry import ids, registered
from builder.judgement.severity import BLOCK
from builder.verify import expect as expectations
from builder.verify.report import CheckResult, Report
from builder.verify.runner import run_suite, suite_checks
from builder.workspace import open_workspace
from tests.docs.tables import first_column_ids

from .fatbin_bytes import SASS, container, elf64, entry

REPO = Path(__file__).resolve().parents[2]
CPU_CELL = "debian12-cpu-py3.11-torch2.13.0-runtime"
CHECKS = [
    "os_release",
    "python_version",
    "torch_version",
    "cuda_version",
    "gcc_version",
    "trainer_version",
    "nvidia_smi",
    "sm_kernels_arch_flags",
    "sm_kernels_fatbin_scan",
    "train_bf16",
    "train_fp8_fwd",
    "train_compile",
    "cpp_extension",
    "nvidia_environment",
    "labels",
    "default_user_not_root",
]


@pytest.fixture
def local_ctx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    ws = open_workspace(REPO / "matrix.yaml", strict=False)
    cell = ws.expansion.find(CPU_CELL)
    assert cell is not None
    expect = expectations.from_cell(cell, ws.matrix.project)
    libs = tmp_path / "libs"
    libs.mkdir()
    (libs / "libtorch_cuda.so").write_bytes(elf64({".nv_fatbin": container(entry(SASS, 90))}))
    # a trainer package that cannot be imported shadows the real one: its checks must error
    shadow = tmp_path / "shadow" / "trainer"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ImportError("no trainer in this test")\n')
    monkeypatch.setenv("PYTHONPATH", str(shadow.parent))
    monkeypatch.chdir(tmp_path)
    return {
        "host": "local://",
        "engine": "local",
        "container": "-",
        "image": {
            "ref": "local-test",
            "id": "sha256:" + "1" * 64,
            "labels": {**expect["labels"], "io.trainimg.cell.hash": expect["content_hash"]},
            "env": expect["env"],
            "user": "1000:1000",
            "entrypoint": [sys.executable, "-m", "trainer"],
        },
        "gpu": {"attached": False, "reason": "no GPU in this test"},
        "expect": expect,
        "train": {"steps": 2},
        "scan_roots": [str(libs)],
    }


def test_mixed_outcomes_and_reports(local_ctx: dict[str, Any], tmp_path: Path) -> None:
    junit = tmp_path / "verify.xml"
    code, checks = run_suite(local_ctx, str(junit))
    assert code == pytest.ExitCode.TESTS_FAILED
    by_name = {c.name: c for c in checks}
    assert [c.name for c in checks] == CHECKS
    outcome = {c.name: c.outcome for c in checks}
    # this machine is Debian 12 with the same Python and torch as the CPU cell
    assert outcome["os_release"] == "passed" and outcome["python_version"] == "passed"
    assert outcome["torch_version"] == "passed" and outcome["cuda_version"] == "passed"
    assert outcome["labels"] == "passed" and outcome["nvidia_environment"] == "passed"
    assert "torch 2.13.0+cpu" in by_name["torch_version"].details
    # not applicable / no GPU: skipped with the reason, never passed
    # this machine has gcc: a runtime image with a compiler shows its version (torch.compile)
    assert outcome["gcc_version"] == "passed"
    assert "(for torch.compile)" in " ".join(by_name["gcc_version"].details)
    assert outcome["cpp_extension"] == "skipped" and "runtime" in by_name["cpp_extension"].message
    assert (
        outcome["nvidia_smi"] == "skipped"
        and by_name["nvidia_smi"].message == "no GPU in this test"
    )
    assert outcome["sm_kernels_arch_flags"] == "skipped"
    assert by_name["sm_kernels_arch_flags"].message.startswith("not applicable: a CPU cell")
    # a CPU cell whose libraries carry CUDA kernels, run as root: failures that say why
    assert outcome["sm_kernels_fatbin_scan"] == "failed"
    assert (
        "torch carries CUDA kernels: libtorch_cuda.so" in by_name["sm_kernels_fatbin_scan"].message
    )
    assert outcome["default_user_not_root"] == "failed"
    assert "runs as uid 0" in by_name["default_user_not_root"].message or (
        "commands run as uid 0" in by_name["default_user_not_root"].message
    )
    # no trainer here: its fixture breaks, the checks that need it are errors
    for name in ("trainer_version", "train_bf16", "train_fp8_fwd", "train_compile"):
        assert outcome[name] == "error", (name, by_name[name])
        assert "trainer" in by_name[name].message

    report = Report(
        image="local-test",
        image_id="sha256:1",
        cell=CPU_CELL,
        matrix=True,
        engine="local",
        container="-",
        gpu=local_ctx["gpu"],
        checks=checks,
        pytest_exit=code,
    )
    assert not report.ok
    counts = report.counts()
    assert counts == {"passed": 7, "failed": 2, "error": 4, "skipped": 3}
    text = report.text()
    assert "SKIP  nvidia_smi" in text and "no GPU in this test" in text
    assert "FAIL  default_user_not_root" in text
    assert text.splitlines()[-1].startswith("FAILED: 16 checks: 7 passed, 2 failed, 4 errors")
    data = json.loads(report.to_json())
    assert data["ok"] is False and data["summary"] == counts
    assert data["compared_with"] == "matrix" and data["gpu"]["attached"] is False
    assert data["checks"][0]["name"] == "os_release" and data["checks"][0]["outcome"] == "passed"
    assert list(data["checks"][0]) == ["name", "outcome", "message", "details", "seconds"]

    suite = ET.parse(junit).getroot()  # noqa: S314 - the report this test just wrote
    suite = suite if suite.tag == "testsuite" else suite[0]
    assert suite.get("name") == "trainimg-verify"
    assert int(suite.get("tests", 0)) == 16
    assert int(suite.get("failures", 0)) == 2 and int(suite.get("skipped", 0)) == 3
    skipped = [tc for tc in suite.iter("testcase") if tc.find("skipped") is not None]
    assert any(
        "no GPU in this test" in (tc.find("skipped").get("message") or "")  # type: ignore[union-attr]
        for tc in skipped
    )
    props = [p.get("value") for p in suite.iter("property") if p.get("name") == "detail"]
    assert "torch 2.13.0+cpu" in props


def test_the_registry_and_the_suite_name_the_same_checks_in_order() -> None:
    """Each registered verify check is the suite's test_<id>, and each test is registered."""
    from builder.verify.suite import test_image

    tests = {n: f for n, f in vars(test_image).items() if n.startswith("test_") and callable(f)}
    assert [n.removeprefix("test_") for n in tests] == list(ids("verify")) == CHECKS
    for check in registered("verify"):
        assert check.fn is tests[f"test_{check.id}"] and check.summary


def test_help_lists_every_check_with_its_summary(capsys: pytest.CaptureFixture[str]) -> None:
    from builder.cli import main

    with pytest.raises(SystemExit):
        main(["verify", "--help"])
    epilog = capsys.readouterr().out.split("checks:\n", 1)[1].split("\n\n", 1)[0]
    rows = [line.split(None, 1) for line in epilog.splitlines()]
    assert rows == [[c.id, c.summary] for c in suite_checks()]
    assert [c.id for c in suite_checks()] == CHECKS


def test_docs_table_lists_the_registered_checks_in_order() -> None:
    assert first_column_ids(REPO / "docs" / "verify.md", "check") == list(ids("verify"))


def test_report_ok_needs_a_pass_and_no_failure() -> None:
    def report(*outcomes: str) -> Report:
        checks = [CheckResult.of(f"c{i}", o) for i, o in enumerate(outcomes)]
        return Report("i", "sha256:1", None, False, "podman", "c", {}, checks, 0)

    assert report("passed", "skipped").ok
    assert not report("skipped", "skipped").ok  # nothing passed: not a proof
    assert not report("passed", "error").ok
    assert not report("passed", "failed").ok


def test_outcomes_on_the_severity_scale() -> None:
    """passed is ok, failed and error block, skipped is skip; the report keeps pytest's word."""
    got = {o: CheckResult.of("labels", o, "why") for o in ("passed", "failed", "error", "skipped")}
    assert {o: str(r.severity) for o, r in got.items()} == {
        "passed": "ok",
        "failed": "block",
        "error": "block",
        "skipped": "skip",
    }
    assert got["error"].finding == Finding("labels", BLOCK, "why")
    assert got["error"].as_json() == {
        "name": "labels",
        "outcome": "error",
        "message": "why",
        "details": [],
        "seconds": 0.0,
    }
