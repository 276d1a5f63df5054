"""Compile a small CUDA kernel with an image's nvcc for its TORCH_CUDA_ARCH_LIST, and list the
SASS it got with the fatbin reader: what verify's `cuda_extension` check runs inside a devel
image. No GPU is needed: nvcc compiles for the named arches, the reader reads headers.

The same functions run against any testinfra host, so tests/verify runs them on this machine
with its own nvcc (CUDA 13.0: the arches it still compiles for) to hold the mechanics to a real
compiler.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from builder.arches.scan import parse_output, reader_argv

KERNEL = (
    "__global__ void trainimg_twice(float *x, int n) {"
    " int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }\n"
    'extern "C" void trainimg_launch(float *x, int n) {'
    " trainimg_twice<<<(n + 255) / 256, 256>>>(x, n); }\n"
)
_ARCH = re.compile(r"^([0-9]+)\.([0-9]+)(\+PTX)?$")


class ArchListError(ValueError):
    """A TORCH_CUDA_ARCH_LIST entry that is not MAJOR.MINOR[+PTX]."""


def gencode(arch_list: str) -> tuple[list[str], list[str]]:
    """TORCH_CUDA_ARCH_LIST ('7.0 8.0 10.0', ';' works too, '+PTX' adds PTX) -> nvcc's
    -gencode flags and the SASS names they must produce, as torch.utils.cpp_extension does."""
    flags: list[str] = []
    sass: list[str] = []
    for item in arch_list.replace(";", " ").split():
        m = _ARCH.match(item)
        if m is None:
            raise ArchListError(f"TORCH_CUDA_ARCH_LIST entry {item!r} is not MAJOR.MINOR[+PTX]")
        num = f"{m.group(1)}{m.group(2)}"
        flags.append(f"-gencode=arch=compute_{num},code=sm_{num}")
        if m.group(3):
            flags.append(f"-gencode=arch=compute_{num},code=compute_{num}")
        sass.append(f"sm_{num}")
    if not sass:
        raise ArchListError("TORCH_CUDA_ARCH_LIST is empty")
    return flags, sass


def compile_and_scan(host: Any, python: str, nvcc: str, arch_list: str) -> dict[str, Any]:
    """Build a shared library from KERNEL with `nvcc` on `host` for `arch_list`, then list its
    device code with the fatbin reader run by `python` there. Returns the reader's record of
    the library, plus `sass_wanted`; raises RuntimeError with nvcc's words when it fails."""
    flags, sass = gencode(arch_list)
    workdir = host.run("mktemp -d").stdout.strip()
    try:
        source = f"{workdir}/trainimg_probe.cu"
        library = f"{workdir}/libtrainimg_probe.so"
        build = host.run(
            f"printf '%s' {shlex.quote(KERNEL)} > {source} && "
            f"{shlex.quote(nvcc)} -shared -Xcompiler -fPIC {' '.join(flags)} "
            f"-o {library} {source}"
        )
        if build.rc != 0:
            words = (build.stderr.strip() or build.stdout.strip())[-800:]
            raise RuntimeError(f"nvcc could not compile a kernel for {arch_list}: {words}")
        scan = host.run(shlex.join(reader_argv(python, [library])))
        if scan.rc != 0:
            raise RuntimeError(f"the fatbin reader failed on {library}: {scan.stderr[-400:]}")
        data = parse_output(scan.stdout, library)
    finally:
        host.run(f"rm -rf {shlex.quote(workdir)}")
    if not data["libraries"]:
        raise RuntimeError(f"nvcc's library holds no device code: {data['errors']}")
    lib: dict[str, Any] = data["libraries"][0]
    lib["sass_wanted"] = sass
    return lib
