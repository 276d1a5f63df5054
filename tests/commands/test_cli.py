"""The trainimg front end on the small test matrix: tables, JSON, explain, check, render."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from builder.cli import main
from tests.matrices import DATA, DIGEST_LINE, copy_templates, variant

REPO = Path(__file__).resolve().parents[2]
M = str(DATA / "minimal.yaml")
DAY = ["--today", "2026-11-29"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "matrix", "list", "--matrix", M, *DAY)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["CELL", "OS", "ACCEL"]
    assert any(line.startswith("rocky9-cu128-py3.12-torch2.9.1-devel ") for line in lines)
    assert lines[-1] == "4 cells, 1 excluded"


def test_list_json_with_exclusions(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "matrix", "list", "--matrix", M, "--json", "--all", *DAY)
    data = json.loads(out)
    assert code == 0
    names = [c["name"] for c in data["cells"]]
    assert len(names) == 4 and len(set(c["cell_hash"] for c in data["cells"])) == 4
    cu = next(c for c in data["cells"] if c["name"] == "rocky9-cu128-py3.12-torch2.9.1-runtime")
    assert cu["torch_build"] == "2.9.1+cu128" and cu["min_driver"] == "570.124.06"
    assert "sm_100" in cu["arch_list"] and cu["torchao"] == "0.15.0"
    (ex,) = data["excluded"]
    assert ex["name"] == "rocky9-cu128-py3.12-torch2.11.0-devel"
    assert ex["reason"] == {"code": "policy", "message": "one devel image is enough for the tests"}


def test_explain_prints_every_fact_with_its_source(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "matrix", "explain", "rocky9-cu128-py3.12-torch2.9.1-runtime", "--matrix", M, *DAY
    )
    assert code == 0
    assert "min driver     570.124.06" in out
    assert "arch list      sm_70 sm_75 sm_80 sm_86 sm_90 sm_100 sm_120" in out
    assert "ok    cuda.driver" in out
    assert "source: https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html" in out
    assert "NVIDIA B200 (10.0) runs the sm_100 SASS" in out


def test_explain_excluded_cell_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "matrix", "explain", "rocky9-cu128-py3.12-torch2.11.0-devel", "--matrix", M, *DAY
    )
    assert code == 0
    assert "excluded by group el9: [policy] one devel image is enough" in out


def test_explain_unknown_cell(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "matrix", "explain", "nope", "--matrix", M, *DAY)
    assert code == 2 and "no cell named 'nope'" in err and "rocky9-cu128" in err


def test_explain_a_broken_cell_shows_the_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "m.yaml"
    bad.write_text(variant(("kernel_module: open}", "kernel_module: proprietary}")))
    code, out, _ = run(
        capsys,
        "matrix",
        "explain",
        "rocky9-cu128-py3.12-torch2.9.1-runtime",
        "--matrix",
        str(bad),
        *DAY,
    )
    assert code == 2
    assert "block gpu.open-modules" in out


def test_check_reports_all_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "m.yaml"
    bad.write_text(variant(("kernel_module: open}", "kernel_module: proprietary}")))
    # (--stale-minors: this test matrix's torch is old on purpose; matrix.stale has its own tests)
    code, out, _ = run(
        capsys, "matrix", "check", "--matrix", str(bad), *DAY, "--stale-minors", "99"
    )
    assert code == 2
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 6  # 3 cuda cells x (B200, RTX 5090)
    line = bad.read_text().splitlines().index("      driver: [r580-open]") + 1
    assert all(
        e.startswith(f"error: {bad}:{line}: groups[0].axes.driver[0]: cell ") for e in errors
    )
    assert out.splitlines()[-1] == "4 cells checked: 6 errors, 0 warnings"


def test_check_json_and_strict(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    late = ["--today", "2028-05-01"]  # Debian 12 LTS ends 2028-06-30: a warning
    code, out, _ = run(capsys, "matrix", "check", "--matrix", M, "--json", *late)
    data = json.loads(out)
    assert code == 0 and data["errors"] == []
    # ... and R580 (end of life 2028-06-30) is within 180 days of it, as preflight says too;
    # and by then the facts data files were read long ago
    assert {w["check"] for w in data["warnings"]} == {"os.eol", "driver.eol", "matrix.stale"}
    code, _, _ = run(capsys, "matrix", "check", "--matrix", M, "--strict", *late)
    assert code == 1


def test_render_then_check(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    copy_templates(tmp_path)
    matrix = tmp_path / "matrix.yaml"
    shutil.copy(M, matrix)
    code, out, _ = run(capsys, "render", "--check", "--matrix", str(matrix), *DAY)
    assert code == 1 and out.count("missing: images/") == 4
    code, out, _ = run(capsys, "render", "--matrix", str(matrix), *DAY)
    assert (
        code == 0 and out.strip() == "4 cells: 4 written, 0 updated, 0 stale removed, 0 unchanged"
    )
    code, out, _ = run(capsys, "render", "--check", "--matrix", str(matrix), *DAY)
    assert code == 0 and "4 Containerfiles up to date" in out
    matrix.write_text(matrix.read_text().replace("numpy: 2.3.5", "numpy: 2.3.4"))
    code, out, err = run(capsys, "render", "--check", "--matrix", str(matrix), *DAY)
    assert code == 1 and out.count("changed: images/") == 4 and "has drifted" in err


def test_render_warns_about_unpinned_bases(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    copy_templates(tmp_path)
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(variant((DIGEST_LINE, "")))
    code, _, err = run(capsys, "render", "--matrix", str(matrix), *DAY)
    assert code == 0
    assert "warning: 3 cells use a base not pinned by digest" in err
    assert "quay.io/rockylinux/rockylinux:9.6" in err


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.startswith("trainimg ")
    with pytest.raises(SystemExit):
        main(["matrix", "--help"])
    assert "{list,explain,check}" in capsys.readouterr().out
