"""The cu128 image, built air-gapped here: `trainimg verify` passes the sm_100 check by scanning
its CUDA libraries (no GPU), trains BF16 and under torch.compile on the CPU inside it, and skips
nvidia-smi with its reason; `trainimg arches` lists every CUDA library with the verdict its
kernel-dispatch rule gives (builder/facts/kernel_dispatch.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from builder.cli import main
from builder.facts import kernel_dispatch
from builder.verify.runner import verify
from builder.verify.target import load_workspace
from tests.conftest import REPO, build_cell

pytestmark = [pytest.mark.engine, pytest.mark.slow]


@pytest.fixture(scope="module")
def report(cu128_image: str, verify_engine: Any) -> Any:
    """Every check but the FP8 step and the any-uid run (the CPU image covers them; ~3 min less
    here), 6 steps."""
    ws = load_workspace(str(REPO / "matrix.yaml"))
    only = "not train_fp8 and not train_any_uid"  # the CPU image proves both
    return verify(verify_engine, cu128_image, workspace=ws, steps=6, only=only)


def _check(report: Any, name: str) -> Any:
    return next(c for c in report.checks if c.name == name)


def test_verify_passes_sm100_by_scanning_every_cuda_library(report: Any) -> None:
    assert report.ok, report.text()
    scan = _check(report, "sm_kernels_fatbin_scan")
    assert scan.outcome == "passed", report.text()
    text = " ".join(scan.details)
    assert "libtorch_cuda.so" in text and "sm_100" in text
    assert "libcublasLt.so.12" in text and "per-arch" in text
    assert _check(report, "sm_kernels_arch_flags").outcome == "passed", report.text()
    assert _check(report, "cuda_version").outcome == "passed", report.text()


def test_trains_on_the_cpu_inside_the_cu128_image(report: Any) -> None:
    for name in ("train_bf16", "train_compile"):
        check = _check(report, name)
        assert check.outcome == "passed", report.text()
        assert "on the CPU, not a GPU" in " ".join(check.details)
    assert "torch.compile" in " ".join(_check(report, "train_compile").details)


def test_nvidia_smi_is_skipped_with_its_reason(report: Any) -> None:
    smi = _check(report, "nvidia_smi")
    assert smi.outcome == "skipped" and "no GPU on this host" in smi.message


def test_arches_lists_every_cuda_library_with_its_rule(
    cu128_image: str, podman_service: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["arches", cu128_image, "--engine", "podman", "--url", podman_service, "--gpu", "b200"]
    capsys.readouterr()
    assert main([*args, "--json"]) == 0, capsys.readouterr().err
    data = json.loads(capsys.readouterr().out)
    names = {Path(lib["path"]).name for lib in data["libraries"]}
    for lib in (
        "libtorch_cuda.so",
        "libcublasLt.so.12",
        "libcublas.so.12",
        "libcufft.so.11",
        "libcusparse.so.12",
        "libnccl.so.2",
    ):
        assert lib in names, sorted(names)
    assert any(n.startswith("libcudnn") for n in names)
    assert len(names) >= 15
    (b200,) = data["gpus"]
    assert b200["verdict"] == "jit", b200  # runs; cuFile's and NVSHMEM's PTX-only modules JIT
    by_name = {Path(c["path"]).name: c for c in b200["libraries"]}
    core = by_name["libtorch_cuda.so"]
    assert core["rule"] == kernel_dispatch.UNIFORM and core["native"] == core["modules"] > 100
    lt = by_name["libcublasLt.so.12"]
    # cuBLASLt ships kernels per architecture: many modules carry no sm_100 code, and that is
    # fine because it dispatches per GPU at run time; judged uniformly it would "not run".
    assert lt["rule"] == kernel_dispatch.PER_ARCH
    assert 0 < lt["native"] < lt["modules"] and lt["missing"] > 0
    assert by_name["libcufft.so.11"]["verdict"] == "documented"
    for name, c in by_name.items():
        if c["rule"] != kernel_dispatch.OPTIONAL:
            assert c["verdict"] in ("yes", "jit", "documented"), (name, c["explain"])
    assert main(args) == 0
    assert "per-architecture kernel sets chosen at run time" in capsys.readouterr().out


DEVEL_CELL = "debian12-cpu-py3.11-torch2.13.0-devel"


def test_devel_image_builds_a_cpp_extension(
    podman_service: str,
    offline_base: str,
    wheelhouse: Path,
    trainer_dir: Path,
    verify_engine: Any,
    tmp_path: Path,
) -> None:
    """The Debian devel cell (CPU: a cu128 devel cell on PyPI's wheels would have no nvcc, see
    builder/judgement/matrix/cuda.py) compiles, imports and runs a torch.utils.cpp_extension
    module inside."""
    image = build_cell(DEVEL_CELL, podman_service, wheelhouse, trainer_dir, tmp_path / "lock.json")
    ws = load_workspace(str(REPO / "matrix.yaml"))
    report = verify(verify_engine, image, workspace=ws, only="cpp_extension or gcc_version")
    got = {c.name: c for c in report.checks}
    assert got["cpp_extension"].outcome == "passed", report.text()
    assert "trainimg_probe" in " ".join(got["cpp_extension"].details)
    assert got["gcc_version"].outcome == "passed", report.text()
