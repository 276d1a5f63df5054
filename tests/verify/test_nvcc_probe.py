"""verify's cuda_extension check, its mechanics: TORCH_CUDA_ARCH_LIST -> nvcc's -gencode
flags, and a kernel compiled with a real nvcc whose SASS the fatbin reader lists.

The devel images' nvcc is CUDA 12.8 (NVIDIA's RPMs), which no registry here serves; the
compile test uses this machine's nvcc (CUDA 13.0, which compiles for sm_75 and newer), so it
proves the probe, not a 12.8 toolchain."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import testinfra

from builder.spec.labels import cell_arch_list, torch_cuda_arch_list
from builder.verify import nvcc_probe
from builder.workspace import open_workspace

REPO = Path(__file__).resolve().parents[2]


def test_gencode_follows_torch_cuda_arch_list() -> None:
    flags, sass = nvcc_probe.gencode("8.0 9.0;10.0+PTX")
    assert sass == ["sm_80", "sm_90", "sm_100"]
    assert flags == [
        "-gencode=arch=compute_80,code=sm_80",
        "-gencode=arch=compute_90,code=sm_90",
        "-gencode=arch=compute_100,code=sm_100",
        "-gencode=arch=compute_100,code=compute_100",
    ]
    for bad in ("", "sm_90", "9", "9.0a", "10.0 ;x"):
        with pytest.raises(nvcc_probe.ArchListError):
            nvcc_probe.gencode(bad)


def test_every_cuda_devel_cell_sets_the_arch_list_torch_was_built_for() -> None:
    """The image's TORCH_CUDA_ARCH_LIST is what the check compares with the arch-list label."""
    ws = open_workspace(REPO / "matrix.yaml")
    devel = [c for c in ws.cells if c.cuda is not None and c.flavour == "devel"]
    assert devel
    for cell in devel:
        _, sass = nvcc_probe.gencode(torch_cuda_arch_list(cell))
        assert sass == list(cell_arch_list(cell) or ()), cell.name  # what the label says
        assert "sm_100" in sass and "sm_120" in sass, cell.name


@pytest.mark.integration
def test_a_kernel_compiles_for_every_arch_of_the_list(nvcc: Path) -> None:
    host = testinfra.get_host("local://")
    lib = nvcc_probe.compile_and_scan(host, sys.executable, str(nvcc), "7.5 8.0 9.0 10.0 12.0+PTX")
    assert lib["sass_wanted"] == ["sm_75", "sm_80", "sm_90", "sm_100", "sm_120"]
    assert lib["sass"] == lib["sass_wanted"]
    assert lib["ptx"] == ["compute_120"]
    with pytest.raises(RuntimeError, match=r"nvcc could not compile a kernel for 3\.5"):
        nvcc_probe.compile_and_scan(host, sys.executable, str(nvcc), "3.5")


def test_the_cuda_extension_probe_links_cublas_and_nccl_by_name() -> None:
    """The probe cuda_extension runs in a devel image is valid Python, links -lcublas and
    -lnccl (the image's link names, docs/build.md) and calls into both libraries."""
    from builder.verify.suite import test_4_extensions as suite

    compile(suite._CUDA_EXTENSION, "cuda_extension probe", "exec")
    assert 'extra_ldflags=["-lcublas", "-lnccl"]' in suite._CUDA_EXTENSION
    assert "cublasGetProperty" in suite._CUDA_EXTENSION
    assert "ncclGetVersion" in suite._CUDA_EXTENSION
