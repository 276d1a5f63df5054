"""The fatbin reader on real CUDA binaries from PyPI: torch 2.9.1 (cu128) and cuRAND.

The downloads are cached in .cache/verify/; where PyPI cannot be reached these tests skip
with the reason. NVIDIA's own cuobjdump (from PyPI too) is the independent reference.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import BinaryIO

import pytest
from packaging.version import Version

from builder.arches import coverage, fatbin
from builder.arches.fatbin import scan_file, scan_paths
from builder.facts import torch_builds
from tests.cuda_fixtures import cuobjdump_list

PROMISED_2_9 = list(torch_builds.arch_list(Version("2.9.1"), "cuda") or ())


def _cuobjdump_names(scan_entries: list[tuple[str, str, int, str]]) -> list[tuple[str, str]]:
    """Our entries in cuobjdump's spelling: PTX as sm_XY, and family cubins without the f."""
    out = []
    for kind, _name, arch, suffix in scan_entries:
        if kind == "sass":
            out.append(("sass", f"sm_{arch}{'' if suffix == 'f' else suffix}"))
        elif kind == "ptx":
            out.append(("ptx", f"sm_{arch}{suffix}"))
    return out


def test_libtorch_cuda_has_blackwell_sass_and_no_maxwell(libtorch_cuda: Path) -> None:
    start = time.monotonic()
    scan = scan_file(libtorch_cuda)
    elapsed = time.monotonic() - start
    assert libtorch_cuda.stat().st_size > 500 << 20
    # every kernel module carries sm_100 (B200) and sm_120 (RTX 5090) SASS
    every = scan.in_every_container("sass")
    assert "sm_100" in every and "sm_120" in every
    assert not [n for n in scan.sass if n.startswith("sm_50")]
    assert "sm_50" not in scan.container_counts()
    # the build arches are exactly what builder.facts promises for torch 2.9 cu128
    assert every == PROMISED_2_9
    assert scan.ptx == []  # cu128 wheels ship no PTX (builder/facts/torch_builds.py)
    assert scan.containers > 100
    assert scan.compressed == len(scan.entries)  # built with -Xfatbin -compress-all
    assert {e.compression for e in scan.entries} == {"lz4"}
    assert elapsed < 15, f"scanning {libtorch_cuda.name} took {elapsed:.1f}s: headers only?"


def test_the_executable_fatbin_decides_nccl_and_nvshmem(
    libnccl: Path, libnvshmem_host: Path, torch_cu128: Path, cuobjdump: Path
) -> None:
    """Three libraries keep their device link's relocatable inputs (`__nv_relfatbin`) ahead of
    the `.nv_fatbin` the runtime loads. The reader lists `.nv_fatbin`, entry for entry what
    cuobjdump lists, and B200, RTX 5090 and H100 run all three natively; judged from the
    relocatable inputs, as the reader did when it took the first section, two of them ran on
    Blackwell "only by JIT"."""
    libtorch_nvshmem = torch_cu128 / "torch" / "lib" / "libtorch_nvshmem.so"
    gpus = {"b200": (10, 0), "rtx5090": (12, 0), "h100": (9, 0)}
    relocatable_said = {}
    for lib in (libnccl, libnvshmem_host, libtorch_nvshmem):
        scan = scan_file(lib)
        assert scan.section == ".nv_fatbin", lib.name
        ours = [(e.kind, e.name, e.arch, e.suffix) for e in scan.entries]
        assert _cuobjdump_names(ours) == cuobjdump_list(cuobjdump, lib), lib.name
        for gpu, cc in gpus.items():
            cov = coverage.library_coverage(scan.to_dict(), cc)
            assert cov.verdict == "yes", (lib.name, gpu, cov.explain())
        with lib.open("rb") as f:
            end = _relocatable_section(f, str(lib))
            entries, count = fatbin._walk(f, str(lib), *end)
        modules = [
            sorted({e.name for e in entries if e.container == i}, key=fatbin.arch_key)
            for i in range(count)
        ]
        relocatable_said[lib.name] = coverage.coverage(lib.name, modules, gpus["b200"]).verdict
    assert relocatable_said == {
        "libnccl.so.2": "yes",
        "libnvshmem_host.so.3": "jit",
        "libtorch_nvshmem.so": "jit",
    }
    # libnccl's four sm_100f-only modules (Blackwell-family kernels) never load on an H100
    h100 = coverage.library_coverage(scan_file(libnccl).to_dict(), gpus["h100"])
    assert (h100.modules, h100.native, h100.elsewhere, h100.missing) == (16, 12, 4, 0)


def _relocatable_section(f: BinaryIO, path: str) -> tuple[int, int]:
    """[start, end) of a library's `__nv_relfatbin` section (the test's own ELF walk)."""
    f.seek(0)
    head = f.read(64)
    shoff, shnum, shstrndx = (
        struct.unpack_from("<Q", head, 40)[0],
        *struct.unpack_from("<HH", head, 60),
    )
    f.seek(shoff)
    table = f.read(64 * shnum)
    sections = [struct.unpack_from("<IIQQQQIIQQ", table, 64 * i) for i in range(shnum)]
    f.seek(sections[shstrndx][4])
    names = f.read(sections[shstrndx][5])
    for sh in sections:
        if names[sh[0] :].split(b"\0", 1)[0] == b"__nv_relfatbin":
            return sh[4], sh[4] + sh[5]
    raise AssertionError(f"{path}: no __nv_relfatbin section")


def test_torch_lib_directory(torch_cu128: Path) -> None:
    result = scan_paths([torch_cu128 / "torch" / "lib"])
    names = {Path(lib.path).name: lib for lib in result.libraries}
    assert {"libtorch_cuda.so", "libtorch_cuda_linalg.so"} <= set(names)
    assert "libtorch_cpu.so" not in names and result.without_device_code >= 5
    assert result.errors == []
    for name in ("libtorch_cuda.so", "libtorch_cuda_linalg.so"):
        assert {"sm_100", "sm_120"} <= set(names[name].in_every_container("sass")), name
    assert "sm_50" in names["libtorch_cuda_linalg.so"].sass  # its bundled solvers keep Maxwell
    # libtorch_nvshmem.so: its executable fatbin runs natively on Blackwell and Hopper (its
    # relocatable link inputs, which the reader does not judge, carry PTX up to compute_90)
    nvshmem = names["libtorch_nvshmem.so"]
    assert nvshmem.section == ".nv_fatbin"
    assert coverage.library_coverage(nvshmem.to_dict(), (10, 0)).verdict == "yes"
    assert coverage.library_coverage(nvshmem.to_dict(), (9, 0)).verdict == "yes"
    assert coverage.library_coverage(names["libtorch_cuda.so"].to_dict(), (6, 1)).verdict == "no"


def test_arch_flags_agree_with_the_scan(torch_cu128: Path, cuda_stub_dir: Path) -> None:
    """torch._C._cuda_getArchFlags() of the same wheel == the arches in every fatbin of
    libtorch_cuda.so. torch is imported for real, its CUDA runtime libraries stubbed out."""
    probe = (
        "import json, torch\n"
        "print(json.dumps({'version': torch.__version__, 'cuda': torch.version.cuda,\n"
        "  'file': torch.__file__, 'flags': torch._C._cuda_getArchFlags(),\n"
        "  'get_arch_list': torch.cuda.get_arch_list()}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(torch_cu128), "LD_LIBRARY_PATH": str(cuda_stub_dir)}
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=torch_cu128,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info["version"] == "2.9.1+cu128" and info["cuda"] == "12.8"
    assert Path(info["file"]).is_relative_to(torch_cu128)
    flags = info["flags"].split()
    scan = scan_file(torch_cu128 / "torch" / "lib" / "libtorch_cuda.so")
    assert flags == scan.in_every_container("sass")
    assert flags == PROMISED_2_9
    # without a GPU get_arch_list() is empty: why verify reads _cuda_getArchFlags()
    assert info["get_arch_list"] == []


def test_curand_older_arches_and_ptx(libcurand: Path) -> None:
    scan = scan_file(libcurand)
    assert scan.in_every_container("sass") == [
        "sm_50",
        "sm_60",
        "sm_70",
        "sm_75",
        "sm_80",
        "sm_86",
        "sm_89",
        "sm_90",
        "sm_100",
        "sm_101",
        "sm_120",
    ]
    assert scan.ptx == ["compute_120"]
    counts = scan.container_counts()
    assert counts["compute_120"] == scan.containers - 1  # one module has no PTX
    assert {e.compression for e in scan.entries if e.kind == "ptx"} == {"lz4"}
    assert all(e.compression is None for e in scan.entries if e.kind == "sass")


def test_cuobjdump_agrees_on_curand(libcurand: Path, cuobjdump: Path) -> None:
    ours = [(e.kind, e.name, e.arch, e.suffix) for e in scan_file(libcurand).entries]
    theirs = cuobjdump_list(cuobjdump, libcurand)
    assert len(theirs) == 131
    assert _cuobjdump_names(ours) == theirs


@pytest.mark.slow
def test_cuobjdump_agrees_on_libtorch_cuda(libtorch_cuda: Path, cuobjdump: Path) -> None:
    ours = [(e.kind, e.name, e.arch, e.suffix) for e in scan_file(libtorch_cuda).entries]
    theirs = cuobjdump_list(cuobjdump, libtorch_cuda)
    assert len(theirs) > 2000
    assert _cuobjdump_names(ours) == theirs
