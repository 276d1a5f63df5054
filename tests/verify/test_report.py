"""The suite and its reports, run against this machine through testinfra's local:// backend
(no container): a mixed result of passed, failed, skipped and errored checks, and how the
summary, the JSON and the JUnit XML show it."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from builder.judgement.finding import Finding
from builder.judgement.registry import ids, registered
from builder.judgement.severity import BLOCK
from builder.verify import expect as expectations
from builder.verify.report import OUTCOMES, CheckResult, Report
from builder.verify.runner import SUITE_DIR, run_suite, suite_checks
from builder.workspace import open_workspace
from tests.arches.fatbin_bytes import SASS, container, elf64, entry
from tests.docs.tables import first_column_ids

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
    "train_any_uid",
    "cpp_extension",
    "cuda_extension",
    "nvidia_environment",
    "labels",
    "default_user_not_root",
    "supply_chain",
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
            "labels": {**expect["labels"], "io.trainimg.cell.hash": expect["cell_hash"]},
            "env": expect["env"],
            "user": "1000:1000",
            "entrypoint": [sys.executable, "-m", "trainer"],
        },
        "gpu": {"attached": False, "reason": "no GPU in this test"},
        "expect": expect,
        "train": {"steps": 2},
        "scan_roots": [str(libs)],
    }


def _os_release() -> dict[str, str]:
    pairs = (line.partition("=") for line in Path("/etc/os-release").read_text().splitlines())
    return {k: v.strip().strip('"') for k, sep, v in pairs if sep}


def _torch() -> tuple[str | None, str | None]:
    """(version, CUDA version) of the torch this interpreter has, read from its files: the
    test process does not import torch (the suite's probe does, in its own process)."""
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None, None
    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.origin is not None
    text = (Path(spec.origin).parent / "version.py").read_text()
    found = re.search(r"^cuda\b[^=]*=\s*['\"]([^'\"]+)['\"]", text, re.M)
    return version, found.group(1) if found else None


def on_this_machine(expect: dict[str, Any]) -> dict[str, str]:
    """The outcomes of the checks that depend on the machine the local:// backend runs on (its
    OS, Python, torch, gcc, and who runs the tests), derived from the machine itself."""
    osr = _os_release()
    want_id, want_version = expect["os_release"]
    same_os = osr.get("ID") == want_id and osr.get("VERSION_ID", "").startswith(want_version)
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    torch_version, torch_cuda = _torch()
    gcc = shutil.which("gcc")
    gcc_runs = (
        gcc is not None
        and subprocess.run([gcc, "-dumpfullversion"], capture_output=True, check=False).returncode
        == 0
    )
    return {
        "os_release": "passed" if same_os else "failed",
        "python_version": "passed" if python == expect["python"] else "failed",
        "torch_version": "passed" if torch_version == expect["torch"] else "failed",
        # a CPU cell: passed unless torch is a CUDA build (a missing torch has no CUDA either)
        "cuda_version": "passed" if torch_cuda is None else "failed",
        # a runtime cell: a compiler, when the machine has one, is shown (torch.compile)
        "gcc_version": "passed" if gcc_runs else "skipped",
        # the image says USER 1000:1000; the checks run as whoever runs the tests
        "default_user_not_root": "failed" if os.getuid() == 0 else "passed",
    }


@pytest.mark.integration
def test_mixed_outcomes_and_reports(local_ctx: dict[str, Any], tmp_path: Path) -> None:
    junit = tmp_path / "verify.xml"
    code, checks = run_suite(local_ctx, str(junit))
    assert code == pytest.ExitCode.TESTS_FAILED
    by_name = {c.name: c for c in checks}
    assert [c.name for c in checks] == CHECKS
    outcome = {c.name: c.outcome for c in checks}
    machine = on_this_machine(local_ctx["expect"])
    want = _mixed_outcomes(machine)
    assert outcome == want, {n: by_name[n].message for n in outcome if outcome[n] != want[n]}
    _assert_messages(by_name, machine, local_ctx)
    _assert_reports(checks, code, want, machine, junit, local_ctx)


def _mixed_outcomes(machine: dict[str, str]) -> dict[str, str]:
    """What each check gives against this machine with the CPU cell's context."""
    return {
        **machine,
        # the context's own labels and environment, right for the CPU cell
        "labels": "passed",
        "nvidia_environment": "passed",
        # not applicable / no GPU: skipped with the reason, never passed
        "cpp_extension": "skipped",
        "cuda_extension": "skipped",
        "nvidia_smi": "skipped",
        # no lock record names this context's image
        "supply_chain": "skipped",
        "sm_kernels_arch_flags": "skipped",
        # a CPU cell whose libraries carry CUDA kernels: a failure that says why
        "sm_kernels_fatbin_scan": "failed",
        # no trainer here: its fixture breaks, the checks that need it are errors
        "trainer_version": "error",
        "train_bf16": "error",
        "train_fp8_fwd": "error",
        "train_compile": "error",
        "train_any_uid": "error",
    }


def _assert_messages(
    by_name: dict[str, CheckResult], machine: dict[str, str], local_ctx: dict[str, Any]
) -> None:
    """Each outcome says why: the details of a pass, the reason of a skip or a failure."""
    if machine["torch_version"] == "passed":
        assert f"torch {local_ctx['expect']['torch']}" in by_name["torch_version"].details
    if machine["gcc_version"] == "passed":
        assert "(for torch.compile)" in " ".join(by_name["gcc_version"].details)
    if machine["default_user_not_root"] == "failed":
        assert "commands run as uid 0" in by_name["default_user_not_root"].message
    assert "runtime" in by_name["cpp_extension"].message
    assert by_name["nvidia_smi"].message == "no GPU in this test"
    assert by_name["sm_kernels_arch_flags"].message.startswith("not applicable: a CPU cell")
    assert (
        "torch carries CUDA kernels: libtorch_cuda.so" in by_name["sm_kernels_fatbin_scan"].message
    )
    for name in (
        "trainer_version",
        "train_bf16",
        "train_fp8_fwd",
        "train_compile",
        "train_any_uid",
    ):
        assert "trainer" in by_name[name].message, (name, by_name[name])


def _assert_reports(
    checks: list[CheckResult],
    code: int,
    want: dict[str, str],
    machine: dict[str, str],
    junit: Path,
    local_ctx: dict[str, Any],
) -> None:
    """The summary, the JSON and the JUnit XML of the same run show the same outcomes."""
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
    assert counts == {o: sum(1 for v in want.values() if v == o) for o in OUTCOMES}
    text = report.text()
    assert "SKIP  nvidia_smi" in text and "no GPU in this test" in text
    assert "FAIL  sm_kernels_fatbin_scan" in text and "ERROR train_bf16" in text
    tag = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP"}
    assert f"{tag[machine['default_user_not_root']]:<5} default_user_not_root" in text
    assert text.splitlines()[-1] == (
        f"FAILED: {len(CHECKS)} checks: {counts['passed']} passed, {counts['failed']} failed, "
        f"{counts['error']} errors, {counts['skipped']} skipped (skipped is not passed)"
    )
    data = json.loads(report.to_json())
    assert data["ok"] is False and data["summary"] == counts
    assert data["compared_with"] == "matrix" and data["gpu"]["attached"] is False
    assert [(c["name"], c["outcome"]) for c in data["checks"]] == [(n, want[n]) for n in CHECKS]
    assert list(data["checks"][0]) == [
        "code", "severity", "message", "name", "outcome", "details", "seconds"
    ]  # fmt: skip

    suite = ET.parse(junit).getroot()  # noqa: S314 - the report this test just wrote
    suite = suite if suite.tag == "testsuite" else suite[0]
    assert suite.get("name") == "trainimg-verify"
    assert int(suite.get("tests", 0)) == len(CHECKS)
    assert int(suite.get("failures", 0)) == counts["failed"]
    assert int(suite.get("skipped", 0)) == counts["skipped"]
    skipped = [tc for tc in suite.iter("testcase") if tc.find("skipped") is not None]
    assert any(
        "no GPU in this test" in (tc.find("skipped").get("message") or "")  # type: ignore[union-attr]
        for tc in skipped
    )
    props = [p.get("value") for p in suite.iter("property") if p.get("name") == "detail"]
    if machine["torch_version"] == "passed":
        assert f"torch {local_ctx['expect']['torch']}" in props


def test_the_registry_and_the_suite_name_the_same_checks_in_order() -> None:
    """Each registered verify check is the suite's test_<id>, and each test is registered, in
    the order pytest runs them: the suite's test files by name, each file's tests as written."""
    tests: dict[str, Any] = {}
    for path in sorted(SUITE_DIR.glob("test_*.py")):
        module = importlib.import_module(f"builder.verify.suite.{path.stem}")
        tests |= {n: f for n, f in vars(module).items() if n.startswith("test_") and callable(f)}
    assert [n.removeprefix("test_") for n in tests] == list(ids("verify")) == CHECKS
    for check in registered("verify"):
        assert check.fn is tests[f"test_{check.id}"] and check.summary


def test_help_lists_every_check_with_its_summary(capsys: pytest.CaptureFixture[str]) -> None:
    from builder.cli import main

    with pytest.raises(SystemExit):
        main(["verify", "--help"])
    epilog = capsys.readouterr().out.split("checks:\n", 1)[1].split("\n\n", 1)[0]
    rows: list[list[str]] = []
    for line in epilog.splitlines():  # a row past the width goes on under its summary
        if line.startswith("   "):
            rows[-1][1] += " " + line.strip()
        else:
            rows.append(line.split(None, 1))
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
        "code": "labels",
        "severity": "block",
        "message": "why",
        "name": "labels",
        "outcome": "error",
        "details": [],
        "seconds": 0.0,
    }
