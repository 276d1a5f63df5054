"""Pins that survive: EL9 OS packages pin the series EL keeps serving (a pin on one build is
warned about unless a snapshot mirror keeps it), the lock records what dnf really installed
(rpm -qa), and `trainimg matrix check` warns when a pin is not what the last build installed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from builder.build import installed_packages, lock
from builder.build.builder import Builder
from builder.build.lock import BuildRecord
from builder.cli import main
from builder.engines.base import RunResult, RunSpec
from builder.errors import MatrixError
from builder.judgement.finding import Finding
from builder.judgement.matrix import check_cell, check_lock
from builder.judgement.severity import OK, WARN
from builder.matrix.expand import expand
from builder.matrix.load import parse_matrix
from builder.spec.render import environment, render_cell
from builder.workspace import open_workspace
from tests.build.test_builder import Run
from tests.conftest import REPO, write_standin_trainer
from tests.fake_engine import FakeEngine, FakeStore
from tests.matrices import MINIMAL, TODAY, cell, load

RUNTIME = "rocky9-cu128-py3.12-torch2.9.1-runtime"
RPM_QA = """\
python3.12 0:3.12.12-1.el9_7.x86_64
python3.12-devel 0:3.12.12-1.el9_7.x86_64
shadow-utils 2:4.9-15.el9.x86_64
gcc 0:11.5.0-11.el9.x86_64
gcc-c++ 0:11.5.0-11.el9.x86_64
gpg-pubkey 0:d42d0685-62f3e5c1.(none)
cuda-cudart-12-8 0:12.8.90-1.x86_64
cuda-compat-12-8 0:570.124.06-1.el9.x86_64
"""


def findings(name: str, rule: str, *replacements: tuple[str, str]) -> list[Finding]:
    return [f for f in check_cell(cell(name, *replacements), TODAY) if f.id == rule]


def test_series_pins_are_what_el_keeps_serving() -> None:
    (f,) = findings(RUNTIME, "os.pins")
    assert f.severity is OK and "python3.12 3.12" in f.message and "gcc 11" in f.message


def test_a_pin_on_one_build_is_warned_about_unless_a_snapshot_keeps_it() -> None:
    one_build = ('shadow-utils: "4.9"', "shadow-utils: 2:4.9-15.el9")
    (f,) = findings(RUNTIME, "os.pins", one_build)
    assert f.severity is WARN
    assert "pins one build of shadow-utils 2:4.9-15.el9" in f.message
    assert "keep only the current minor's builds" in f.message and "mirrors:" in f.remediation
    snapshot = (
        "groups:",
        "mirrors:\n  oses:\n    rocky9:\n      repos:\n"
        "        baseos: https://snap.example.com/2026-11-30/BaseOS\n"
        "        crb: https://snap.example.com/2026-11-30/CRB\n"
        "      gpgkey: file:///etc/pki/rpm-gpg/RPM-GPG-KEY-Rocky-9\n"
        f"      gpgkey_sha256: {'ab' * 32}\ngroups:",
    )
    (f,) = findings(RUNTIME, "os.pins", one_build, snapshot)
    assert f.severity is OK


def test_rpm_qa_is_parsed_without_keys() -> None:
    got = installed_packages.parse_rpm_qa(RPM_QA)
    assert got["shadow-utils"] == "2:4.9-15.el9.x86_64"
    assert "gpg-pubkey" not in got and len(got) == 7


def test_an_el9_build_records_what_dnf_installed(tmp_path: Path) -> None:
    """The builder runs `rpm -qa` in the new EL9 image and keeps it in the lock record."""
    ws = open_workspace(REPO / "matrix.yaml")
    store = FakeStore()
    for c in ws.cells:
        store.add(c.os.base_ref)
    run = Run(ws, store, tmp_path, write_standin_trainer(tmp_path / "trainer", "1.0.0"))
    plans = run.plans([run.ws.cell(RUNTIME)])
    ran: list[list[str]] = []

    def engine() -> FakeEngine:
        e = FakeEngine(run.store, run_result=RunResult(0, RPM_QA, ""))
        original = e.run

        def record(spec: RunSpec, *, timeout: float = 600) -> RunResult:
            ran.append([*(spec.entrypoint or ()), *spec.command])
            return original(spec, timeout=timeout)

        e.run = record  # type: ignore[method-assign]
        return e

    (out,) = Builder(engine, run.opts(), run.lock, run.work, run.ui).run(plans)
    assert out.status == "built", out.error
    assert ran == [["rpm", "-qa", "--qf", installed_packages.QUERY]]
    rec = lock.read(run.lock)[RUNTIME]
    assert rec.packages["cuda-compat-12-8"] == "0:570.124.06-1.el9.x86_64"


def test_matrix_check_warns_when_a_pin_is_not_what_the_last_build_installed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(MINIMAL, encoding="utf-8")
    c = expand(parse_matrix(MINIMAL, str(matrix))).find(RUNTIME)
    assert c is not None
    record = BuildRecord(
        image_id="sha256:" + "1" * 64,
        tags=[],
        digest=None,
        size=0,
        base_image=c.os.base_ref,
        base_digest=None,
        labels={},
        torch=str(c.torch),
        cuda="12.8.1",
        engine="podman",
        built_at="2026-11-30T10:00:00Z",
        build_hash=c.cell_hash,
        packages=installed_packages.parse_rpm_qa(RPM_QA),
    )
    # minimal.yaml pins cuda-compat-12-8 to the 570 branch: the last build installed 570.124.06
    (ok,) = check_lock(c, record, TODAY)
    assert ok.severity is OK and "7 RPMs recorded" in ok.message
    newer = dataclasses.replace(
        record,
        packages={**record.packages, "cuda-compat-12-8": "0:575.57.08-1.el9.x86_64",
                  "gcc": "0:12.1.0-1.el9.x86_64"},
    )  # fmt: skip
    (warn,) = check_lock(c, newer, TODAY)
    assert warn.severity is WARN
    assert "cuda-compat-12-8 570.* (built 0:575.57.08-1.el9)" in warn.message
    # another build of the branch is what the pin asks for
    other = {**record.packages, "cuda-compat-12-8": "0:570.211.01-1.el9.x86_64"}
    (same,) = check_lock(c, dataclasses.replace(record, packages=other), TODAY)
    assert same.severity is OK
    assert "gcc 11 (built 0:12.1.0-1.el9)" in warn.message
    assert "last build (2026-11-30, images/lock.json)" in warn.message
    # the command reads images/lock.json beside the matrix
    lock.update(tmp_path / "images" / "lock.json", RUNTIME, newer)
    code = main(["matrix", "check", "--matrix", str(matrix), "--today", "2026-11-29", "--json",
                 "--stale-minors", "99"])  # fmt: skip
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [w["code"] for w in data["warnings"]] == ["os.pins-recorded"]
    assert data["warnings"][0]["cell"] == RUNTIME


COMPAT = 'cuda-compat-12-8: "570.*"'


def test_cuda_compat_is_pinned_by_its_branch_and_checked_after_install() -> None:
    c = cell(RUNTIME)
    assert c.cuda is not None
    (compat,) = [p for p in c.cuda.repos["el9"].runtime if p.name == "cuda-compat-12-8"]
    assert (compat.version, compat.series, compat.glob) == ("570", True, True)
    text = render_cell(environment(REPO), c, load()[0].project)
    assert "'cuda-compat-12-8-570.*' \\\n" in text
    assert "case \"$v\" in '570'|'570'.*)" in text and "'cuda-compat-12-8'\" $v is not of" in text
    (f,) = findings(RUNTIME, "cuda.pins")
    assert f.severity is OK and "cuda-compat-12-8 570.*" in f.message


def test_an_exact_pin_no_fact_covers_is_warned_about() -> None:
    """cuda-compat follows every driver release of its branch: no fact says a repository keeps
    each build, so one exact build is warned about; the toolkit's packages are kept."""
    (f,) = findings(RUNTIME, "cuda.pins", (COMPAT, "cuda-compat-12-8: 570.211.01"))
    assert f.severity is WARN
    assert "pins one build of cuda-compat-12-8 570.211.01" in f.message
    assert "'570.*'" in f.remediation and "cuda-cudart" not in f.message


@pytest.mark.parametrize("bad", ["570*", "57?.1", "570.*.*", "*"])
def test_a_glob_that_is_not_a_branch_series_is_refused(bad: str) -> None:
    with pytest.raises(MatrixError) as exc:
        load((COMPAT, f'cuda-compat-12-8: "{bad}"'))
    msg = str(exc.value)
    assert "cuda.12.8.1.el9.runtime.cuda-compat-12-8" in msg and repr(bad) in msg
    assert "'570.*'" in msg and exc.value.exit_code == 2
