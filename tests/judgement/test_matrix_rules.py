"""The rules applied to cells: what admits a cell, what warns, what makes the matrix invalid."""

from __future__ import annotations

import datetime as dt

from builder.build.lock import BuildRecord
from builder.judgement.finding import Finding
from builder.judgement.matrix import check_cell, first_error
from builder.judgement.matrix.apply import ALL_CELLS, LOCK_RECORD, PER_GPU, StaleLimits
from builder.judgement.registry import ids, registered
from builder.judgement.severity import BLOCK, OK, WARN
from builder.matrix.model import Cell
from builder.spec.os_install import os_install
from builder.workspace import open_workspace
from tests.conftest import REPO
from tests.docs.tables import first_column_ids
from tests.matrices import TODAY, cell, load

RUNTIME = "rocky9-cu128-py3.12-torch2.9.1-runtime"
R580 = 'branch: "580", min_version: 580.65.06'
CPU = "debian12-cpu-py3.11-torch2.13.0-runtime"


def by_id(findings: list[Finding], rule: str) -> list[Finding]:
    return [f for f in findings if f.id == rule]


def test_valid_cell_is_admitted_by_sourced_facts() -> None:
    findings = check_cell(cell(RUNTIME), TODAY)
    assert all(f.severity is OK for f in findings), [f for f in findings if f.severity is not OK]
    rules = {f.id for f in findings}
    assert {"cuda.driver", "cuda.gcc", "torch.build", "torch.python", "gpu.arch"} <= rules
    driver = by_id(findings, "cuda.driver")[0]
    assert "570.124.06" in driver.message
    assert any("cuda-toolkit-release-notes" in s.ref for s in driver.sources)
    arch = by_id(findings, "gpu.arch")
    assert [f.message.split(" runs the ")[1].split()[0] for f in arch] == [
        "sm_90",
        "sm_100",
        "sm_120",
    ]


def test_driver_below_cuda_minimum_blocks_and_mentions_mvc_and_forward_compat() -> None:
    c = cell(RUNTIME, (R580, 'branch: "550", min_version: 550.54.14'))
    found = by_id(check_cell(c, TODAY), "cuda.driver")
    assert found and all(f.severity is BLOCK for f in found)
    text = " ".join(f.message for f in found)
    assert "needs a driver of CUDA 12.8 (>= 570.124.06 for the release)" in text
    assert "minor-version compatibility" in text
    assert "forward compatibility" in text  # 550 is in cuda-compat-12-8's matrix
    # the reason codes are the image x host judgement's: the GeForce target fails the label
    assert {f.reason for f in found} == {"require.unsatisfied", "fwd.ineligible-gpu"}


def test_driver_below_mvc_floor_mentions_no_minor_version_compatibility() -> None:
    c = cell(RUNTIME, (R580, 'branch: "470", min_version: 470.256.02'))
    found = by_id(check_cell(c, TODAY), "cuda.driver")
    assert found and all(f.severity is BLOCK for f in found)
    assert not any("minor-version" in f.message for f in found)


def test_a_same_minor_driver_runs_every_patch_release() -> None:
    """570.26 is CUDA 12.8's first driver: it runs 12.8.1 (a 12.8 driver runs every 12.8.x)."""
    c = cell(RUNTIME, (R580, 'branch: "570", min_version: 570.26'))
    (f,) = by_id(check_cell(c, TODAY), "cuda.driver")
    assert f.severity is OK


def test_driver_eol_is_the_lifecycle_preflight_gives() -> None:
    """On 2026-01-15 R570 ends in 44 days and R575 is out of support: the matrix and
    preflight say the same (builder/judgement/driver_life.py)."""
    day = dt.date(2026, 1, 15)
    r570 = cell(RUNTIME, (R580, 'branch: "570", min_version: 570.124.06'))
    (f,) = by_id(check_cell(r570, day), "driver.eol")
    assert f.severity is WARN and f.reason == "driver.eol-soon" and "(44 days)" in f.message
    r575 = cell(RUNTIME, (R580, 'branch: "575", min_version: 575.57.08'))
    (f,) = by_id(check_cell(r575, day), "driver.eol")
    assert f.severity is WARN and f.reason == "driver.unlisted"
    assert "no longer supported" in f.message


def test_blackwell_needs_open_modules() -> None:
    c = cell(RUNTIME, ("kernel_module: open}", "kernel_module: proprietary}"))
    errors = [f for f in by_id(check_cell(c, TODAY), "gpu.open-modules")]
    assert {f.message.split(" needs")[0] for f in errors} == {"NVIDIA B200", "GeForce RTX 5090"}
    assert all(f.severity is BLOCK for f in errors)


def test_proprietary_modules_do_not_exist_from_r620() -> None:
    c = cell(
        RUNTIME,
        (
            'branch: "580", min_version: 580.65.06, kernel_module: open',
            'branch: "620", min_version: 620.10.01, kernel_module: proprietary',
        ),
    )
    (f,) = by_id(check_cell(c, TODAY), "driver.module")
    assert f.severity is BLOCK and "removed from R620" in f.message


def test_gpu_without_sass_in_the_wheel_is_no_kernel_image() -> None:
    # torch 2.11 dropped sm_70; a Volta-era arch list cannot run Blackwell either
    c = cell(RUNTIME, ("gpus: [h100, b200, rtx5090]", "gpus: [a100, b300]"))
    arch = by_id(check_cell(c, TODAY), "gpu.arch")
    assert [f.severity for f in arch] == [OK, OK]
    cuda = by_id(check_cell(c, TODAY), "gpu.cuda")
    assert cuda and cuda[0].severity is WARN and "B300" in cuda[0].message  # no native 10.3 target


def test_fp8_on_ampere_warns() -> None:
    c = cell(RUNTIME, ("gpus: [h100, b200, rtx5090]", "gpus: [a100]"))
    (f,) = by_id(check_cell(c, TODAY), "gpu.fp8")
    assert f.severity is WARN and "sm_89" in f.message


def test_rowwise_note_on_sm120() -> None:
    notes = by_id(check_cell(cell(RUNTIME), TODAY), "gpu.fp8")
    assert len(notes) == 1 and "tensor-wise" in notes[0].message and "RTX 5090" in notes[0].message


def test_eol_warnings_follow_the_date() -> None:
    c = cell(CPU)
    assert by_id(check_cell(c, TODAY), "os.eol")[0].severity is OK
    late = by_id(check_cell(c, dt.date(2028, 5, 1)), "os.eol")[0]
    assert late.severity is WARN and "days" in late.message
    assert "reached end of life" in by_id(check_cell(c, dt.date(2029, 1, 1)), "os.eol")[0].message


def test_unpinned_base_warns() -> None:
    c = cell(
        RUNTIME,
        (
            "    digest: sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n",
            "",
        ),
    )
    (f,) = by_id(check_cell(c, TODAY), "base.pinned")
    assert f.severity is WARN and "oses.rocky9.digest" in f.message


def test_transformer_engine_needs_devel() -> None:
    _, expansion = load(("fp8: [torchao]", "fp8: [transformer-engine]"))
    flavours = {c.flavour: check_cell(c, TODAY) for c in expansion.cells if c.cuda}
    assert by_id(flavours["runtime"], "fp8.transformer-engine")[0].severity is BLOCK
    assert by_id(flavours["devel"], "fp8.transformer-engine")[0].severity is OK


def test_gcc_outside_nvcc_window() -> None:
    c = cell(RUNTIME, ('gcc: ["11"]', 'gcc: ["15"]'))
    (f,) = by_id(check_cell(c, TODAY), "cuda.gcc")
    assert f.severity is BLOCK and "6..14" in f.message


def test_devel_cell_needs_gcc_pins_for_its_gcc() -> None:
    c = cell("rocky9-cu128-py3.12-torch2.9.1-devel", ('"11": {gcc:', '"12": {gcc:'))
    (f,) = by_id(check_cell(c, TODAY), "os.gcc")
    assert f.severity is BLOCK and "no package pins for gcc 11" in f.message


def test_first_error_points_at_the_axis_value_line() -> None:
    matrix, expansion = load(("torch: [2.9.1, 2.11.0]", "torch: [2.9.1, 2.11.0, 2.12.0]"))
    err = first_error(matrix, expansion, TODAY)
    assert err is not None
    assert err.keypath == "groups[0].axes.torch[2]"
    assert err.line == matrix.lines["groups[0].axes.torch[2]"]
    assert "torch 2.12.0 has no cu128 build" in str(err)


def _cells() -> list[Cell]:
    """The shipped matrix's cells and variants of the test matrix that make every rule speak."""
    shipped = open_workspace(REPO / "matrix.yaml", strict=False).cells
    variants = [
        ("kernel_module: open}", "kernel_module: proprietary}"),
        ("gpus: [h100, b200, rtx5090]", "gpus: [a100, b300]"),
        ("fp8: [torchao]", "fp8: [transformer-engine]"),
        ('gcc: ["11"]', 'gcc: ["15"]'),
        ("torch: [2.9.1, 2.11.0]", "torch: [2.9.1, 2.11.0, 2.12.0]"),
        ('"11": {gcc:', '"12": {gcc:'),
        ("      flavour: [runtime]\n", "      flavour: [runtime]\n    gpus: [h100]\n"),
    ]
    unknown_cuda = load(("  12.8.1:\n", "  12.8.2:\n"), ("cuda: [12.8.1]", "cuda: [12.8.2]"))
    return [
        *shipped,
        *(c for v in variants for c in load(v)[1].cells),
        *unknown_cuda[1].cells,
    ]


def _record_of(cell: Cell) -> BuildRecord:
    """A lock record whose packages are exactly the cell's pins (as its last build installed)."""
    pins = list(os_install(cell).os_pins)
    return BuildRecord(
        image_id="sha256:" + "1" * 64,
        tags=[],
        digest=None,
        size=0,
        base_image=cell.os.base_ref,
        base_digest=None,
        labels={},
        torch=str(cell.torch),
        cuda=None,
        engine="fake",
        built_at="2026-11-29T00:00:00Z",
        build_hash=cell.cell_hash,
        packages={p.name: f"0:{p.version}.0-1.el9.x86_64" for p in pins},
    )


def test_every_finding_carries_the_id_of_the_rule_that_made_it() -> None:
    cells = _cells()
    seen: set[str] = set()
    for rule in registered("matrix"):
        for c in cells:
            if PER_GPU in rule.reads:
                found = [rule.fn(c, g, TODAY) for g in c.gpus]
            elif LOCK_RECORD in rule.reads:  # judged against a lock record: its last build
                found = [rule.fn(c, _record_of(c), TODAY)]
            elif ALL_CELLS in rule.reads:  # judged on the cells together, with no slack
                found = [[f for _, f in rule.fn(cells, TODAY, StaleLimits(0, 0))]]
            else:
                found = [rule.fn(c, TODAY)]
            for f in (f for out in found for f in out):
                assert f.id == rule.id, (rule.id, c.name, f)
                seen.add(f.id)
    assert {f.id for c in cells for f in check_cell(c, TODAY)} <= set(ids("matrix"))
    assert seen == set(ids("matrix"))  # and every rule spoke on some cell here


def test_docs_table_lists_the_registered_rules_in_order() -> None:
    assert first_column_ids(REPO / "docs" / "matrix.md", "rule") == list(ids("matrix"))
