"""The fatbin reader on libraries nvcc builds here, compared with NVIDIA's cuobjdump."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from builder.arches.fatbin import scan_file
from tests.cuda_fixtures import cuobjdump_list

KERNEL = """
__global__ void k{n}(float *a, const float *b, int n) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] += {n} * b[i]; }}
extern "C" void launch{n}(float *a, const float *b, int n) {{
  k{n}<<<(n + 255) / 256, 256>>>(a, b, n); }}
"""


@pytest.fixture(scope="module")
def built(nvcc: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("nvcc")
    for n in range(3):
        (d / f"k{n}.cu").write_text(KERNEL.format(n=n))

    def run(*args: str) -> None:
        proc = subprocess.run(
            [str(nvcc), *args], cwd=d, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, proc.stderr[-2000:]

    run(
        "-shared",
        "-Xcompiler",
        "-fPIC",
        "-o",
        "libmulti.so",
        "k0.cu",
        "k1.cu",
        "k2.cu",
        "-gencode",
        "arch=compute_80,code=sm_80",
        "-gencode",
        "arch=compute_120,code=[sm_120,compute_120]",
    )
    run(
        "-c",
        "k0.cu",
        "-o",
        "special.o",
        "-gencode",
        "arch=compute_90a,code=sm_90a",
        "-gencode",
        "arch=compute_100f,code=sm_100f",
        "-gencode",
        "arch=compute_100a,code=sm_100a",
        "-gencode",
        "arch=compute_103a,code=compute_103a",
        "-gencode",
        "arch=compute_120f,code=compute_120f",
    )
    run(
        "-c",
        "k0.cu",
        "-o",
        "lz4.o",
        "-Xfatbin",
        "-compress-all",
        "-compress-mode=speed",
        "-gencode",
        "arch=compute_80,code=sm_80",
    )
    run(
        "-c",
        "k0.cu",
        "-o",
        "plain.o",
        "-compress-mode=none",
        "-gencode",
        "arch=compute_75,code=[sm_75,compute_75]",
    )
    run("-c", "k0.cu", "-o", "lto.o", "-rdc=true", "-gencode", "arch=compute_90,code=lto_90")
    run(
        "-fatbin",
        "k0.cu",
        "-o",
        "k0.fatbin",
        "-gencode",
        "arch=compute_86,code=sm_86",
        "-gencode",
        "arch=compute_100,code=compute_100",
    )
    return {p.name: p for p in d.iterdir()}


def test_shared_library_with_several_modules(built: dict[str, Path]) -> None:
    scan = scan_file(built["libmulti.so"])
    assert scan.containers >= 3  # one container per .cu file (plus cudart's own)
    assert scan.in_every_container("sass") == ["sm_80", "sm_120"]
    assert scan.ptx == ["compute_120"]
    assert scan.container_counts()["compute_120"] >= 3


def test_arch_and_family_specific_targets(built: dict[str, Path]) -> None:
    names = sorted(e.name for e in scan_file(built["special.o"]).entries)
    assert names == ["compute_103a", "compute_120f", "sm_100a", "sm_100f", "sm_90a"]


def test_compression_modes(built: dict[str, Path]) -> None:
    assert [e.compression for e in scan_file(built["lz4.o"]).entries] == ["lz4"]
    plain = scan_file(built["plain.o"]).entries
    assert [(e.name, e.compression) for e in plain] == [("sm_75", None), ("compute_75", None)]
    default = scan_file(built["libmulti.so"]).entries
    assert {e.compression for e in default if e.kind == "ptx"} == {"zstd"}  # nvcc 13's default


def test_lto_ir_in_relocatable_object(built: dict[str, Path]) -> None:
    scan = scan_file(built["lto.o"])
    assert scan.section == "__nv_relfatbin"
    assert [e.name for e in scan.entries] == ["lto_90"] and scan.sass == []


def test_raw_fatbin(built: dict[str, Path]) -> None:
    scan = scan_file(built["k0.fatbin"])
    assert scan.section == "fatbin"
    assert [e.name for e in scan.entries] == ["sm_86", "compute_100"]


@pytest.mark.parametrize("name", ["libmulti.so", "special.o", "plain.o", "k0.fatbin"])
def test_cuobjdump_agrees(built: dict[str, Path], cuobjdump: Path, name: str) -> None:
    ours = []
    for e in scan_file(built[name]).entries:
        suffix = "" if (e.kind == "sass" and e.suffix == "f") else e.suffix
        ours.append((e.kind, f"sm_{e.arch}{suffix}"))
    assert ours == cuobjdump_list(cuobjdump, built[name])
