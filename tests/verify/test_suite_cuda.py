"""The CUDA-cell checks of the suite against PyPI's real torch 2.9.1+cu128, on this GPU-less
machine through testinfra's local:// backend (its CUDA runtime stubbed, see cuda_stubs.py):
arch flags, the fatbin scan and NVIDIA_* as a cu128 image must show them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from builder.verify import expect as expectations
from builder.verify.runner import run_suite
from builder.workspace import open_workspace

REPO = Path(__file__).resolve().parents[2]
CELL = "rocky9-cu128-py3.12-torch2.9.1-devel"
CUDA_CHECKS = "arch_flags or fatbin_scan or nvidia_environment or cuda_version or gcc"


@pytest.fixture
def cuda_ctx(
    torch_cu128: Path, cuda_stub_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> dict[str, Any]:
    ws = open_workspace(REPO / "matrix.yaml", strict=False)
    cell = ws.expansion.find(CELL)
    assert cell is not None
    expect = expectations.from_cell(cell, ws.matrix.project)
    env = dict(expect["env"])
    for key in (
        "CUDA_VERSION",
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",
        "NVIDIA_REQUIRE_CUDA",
    ):
        monkeypatch.setenv(key, env[key])
    monkeypatch.setenv("PYTHONPATH", str(torch_cu128))
    monkeypatch.setenv("LD_LIBRARY_PATH", str(cuda_stub_dir))
    return {
        "host": "local://",
        "engine": "local",
        "container": "-",
        "image": {
            "ref": "local-cu128",
            "id": "sha256:" + "2" * 64,
            "labels": {**expect["labels"], "io.trainimg.cell.hash": expect["cell_hash"]},
            "env": env,
            "user": "1000:1000",
            "entrypoint": [sys.executable, "-m", "trainer"],
        },
        "gpu": {"attached": False, "reason": "no GPU in this test"},
        "expect": expect,
        "train": {"steps": 2},
        "scan_roots": [str(torch_cu128 / "torch")],
        # the EL9 cell ships cuda-compat (its label's brand windows say so): a stand-in for
        # its libcuda, since this machine has no /usr/local/cuda-12.8/compat
        "compat_libs": str(_compat_stand_in(tmp_path)) + "/libcuda.so.*",
    }


def _compat_stand_in(tmp_path: Path) -> Path:
    compat = tmp_path / "cuda-12.8" / "compat"
    compat.mkdir(parents=True)
    (compat / "libcuda.so.570.124.06").write_bytes(b"")
    return compat


def outcomes(ctx: dict[str, Any], only: str = CUDA_CHECKS) -> dict[str, tuple[str, str]]:
    code, checks = run_suite(ctx, only=only)
    assert code in (0, 1)
    return {c.name: (c.outcome, c.message or " ".join(c.details)) for c in checks}


def test_cu128_torch_passes_the_cuda_checks(cuda_ctx: dict[str, Any]) -> None:
    got = outcomes(cuda_ctx)
    assert got["cuda_version"][0] == "passed", got
    assert got["sm_kernels_arch_flags"] == (
        "passed",
        "arch flags: sm_70 sm_75 sm_80 sm_86 sm_90 sm_100 sm_120",
    )
    assert got["sm_kernels_fatbin_scan"][0] == "passed", got
    assert "libtorch_cuda.so: 397 modules, all with" in got["sm_kernels_fatbin_scan"][1]
    assert (
        "native SASS for every target GPU: h100, h200, b200, b300, rtx5090, rtx-pro-6000"
        in (got["sm_kernels_fatbin_scan"][1])
    )
    assert got["nvidia_environment"][0] == "passed", got
    assert got["nvidia_environment"][1].startswith("cuda>=12.8 (+")
    # a devel cell: gcc is checked here (this machine's gcc 12 is not the cell's gcc 11)
    assert got["gcc_version"][0] == "failed" and "gcc major" in got["gcc_version"][1]


def test_a_promised_arch_that_is_missing_fails_both_scans(cuda_ctx: dict[str, Any]) -> None:
    cuda_ctx["expect"]["arch_list"] = [*cuda_ctx["expect"]["arch_list"], "sm_61"]
    cuda_ctx["image"]["labels"]["io.trainimg.cuda.arch-list"] = " ".join(
        cuda_ctx["expect"]["arch_list"]
    )
    got = outcomes(cuda_ctx, "sm_kernels")
    assert got["sm_kernels_arch_flags"][0] == "failed"
    assert "lacks sm_61" in got["sm_kernels_arch_flags"][1]
    assert got["sm_kernels_fatbin_scan"][0] == "failed"
    assert (
        "sm_61 SASS missing from some of its 397 kernel modules" in got["sm_kernels_fatbin_scan"][1]
    )


def test_label_and_matrix_arch_lists_must_agree(cuda_ctx: dict[str, Any]) -> None:
    cuda_ctx["image"]["labels"]["io.trainimg.cuda.arch-list"] = "sm_90"
    got = outcomes(cuda_ctx, "arch_flags")
    assert got["sm_kernels_arch_flags"][0] == "failed"
    assert (
        "label io.trainimg.cuda.arch-list says sm_90, the matrix promises"
        in (got["sm_kernels_arch_flags"][1])
    )


def test_wrong_nvidia_require_cuda(
    cuda_ctx: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    cuda_ctx["image"]["env"]["NVIDIA_REQUIRE_CUDA"] = "cuda>=12.4"
    monkeypatch.setenv("NVIDIA_REQUIRE_CUDA", "cuda>=12.4")
    got = outcomes(cuda_ctx, "nvidia_environment")
    assert got["nvidia_environment"][0] == "failed"
    assert "differs from what CUDA 12.8.1 requires" in got["nvidia_environment"][1]


def test_brand_windows_without_cuda_compat_fail(cuda_ctx: dict[str, Any]) -> None:
    """The label may claim forward compatibility only where cuda-compat is in the image."""
    cuda_ctx["compat_libs"] = "/nonexistent-h21/libcuda.so.*"
    got = outcomes(cuda_ctx, "nvidia_environment")
    assert got["nvidia_environment"][0] == "failed"
    assert "ships no cuda-compat" in got["nvidia_environment"][1]


def test_a_target_gpu_without_native_kernels_fails(cuda_ctx: dict[str, Any]) -> None:
    cuda_ctx["image"]["labels"]["io.trainimg.gpus"] = "b200 thor"  # Thor is sm_110: no SASS
    got = outcomes(cuda_ctx, "fatbin_scan")
    assert got["sm_kernels_fatbin_scan"][0] == "failed"
    assert (
        "does not run natively on every GPU the cell targets: Jetson T5000 (sm_110): no:"
        in (got["sm_kernels_fatbin_scan"][1])
    )
