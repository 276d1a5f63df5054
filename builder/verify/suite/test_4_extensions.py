"""Verify checks, fourth: extensions - a devel image builds a C++ and (CUDA cells) a CUDA
torch extension, with nvcc making SASS for the arch list torch has."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from builder.judgement.registry import check
from builder.spec.labels import ARCH_LIST_LABEL
from builder.verify import nvcc_probe
from builder.verify.suite.common import Detail, fail, is_cuda, labels

_CPP_EXTENSION = """
import tempfile, torch
from torch.utils.cpp_extension import load_inline
src = "torch::Tensor twice(torch::Tensor x) { return x * 2; }"
mod = load_inline(name="trainimg_probe", cpp_sources=[src], functions=["twice"],
                  build_directory=tempfile.mkdtemp())
x = torch.arange(4.0)
assert torch.equal(mod.twice(x), x * 2)
print(mod.__file__)
"""


@check(
    "cpp_extension",
    "verify",
    summary="devel: a torch.utils.cpp_extension module builds and runs",
)
def test_cpp_extension(host: Any, python: str, ctx: dict[str, Any], detail: Detail) -> None:
    """A devel image builds extensions: torch.utils.cpp_extension compiles (g++, ninja, the
    Python and torch headers), links, imports and runs a tiny C++ operator inside it."""
    flavour = ctx["expect"].get("flavour")
    if flavour != "devel":
        pytest.skip(f"not applicable: the {flavour} flavour (extensions are built in devel images)")
    result = host.run(f"cd /tmp && timeout 600 {python} -c {shlex.quote(_CPP_EXTENSION)}")
    if result.rc != 0:
        tail = (result.stderr.strip() or result.stdout.strip())[-800:]
        fail(
            f"torch.utils.cpp_extension could not build a C++ extension (exit {result.rc}): {tail}"
        )
    detail(f"built, imported and ran {result.stdout.strip().splitlines()[-1]}")


_CUDA_EXTENSION = """
import tempfile, torch
from torch.utils.cpp_extension import load_inline
cuda = (
    "#include <cublas_v2.h>\\n#include <nccl.h>\\n"
    "int64_t linked() { int blas = 0, nccl = 0; cublasGetProperty(MAJOR_VERSION, &blas);"
    " ncclGetVersion(&nccl); return blas * 100000 + nccl; }\\n"
    "__global__ void twice_kernel(float *x, int n) {"
    " int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }\\n"
    "torch::Tensor twice(torch::Tensor x) { auto y = x.clone(); int n = y.numel();"
    " twice_kernel<<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), n); return y; }\\n"
)
mod = load_inline(name="trainimg_cuda_probe", functions=["twice", "linked"],
                  cpp_sources=["torch::Tensor twice(torch::Tensor x);\\nint64_t linked();"],
                  cuda_sources=[cuda], extra_ldflags=["-lcublas", "-lnccl"],
                  build_directory=tempfile.mkdtemp())
blas, nccl = divmod(mod.linked(), 100000)
assert blas >= 12 and nccl > 0, (blas, nccl)
print(f"linked cuBLAS {blas} and NCCL {nccl}")
if torch.cuda.is_available():
    x = torch.arange(4.0, device="cuda")
    assert torch.equal(mod.twice(x), x * 2)
    print("ran on", torch.cuda.get_device_name(0))
print(mod.__file__)
"""


@check(
    "cuda_extension",
    "verify",
    summary="devel CUDA: nvcc compiles a kernel for the arch list; a CUDA extension builds "
    "and links cuBLAS and NCCL",
)
def test_cuda_extension(host: Any, python: str, ctx: dict[str, Any], detail: Detail) -> None:
    """A CUDA devel image builds CUDA extensions without a GPU: its nvcc is the cell's CUDA,
    compiles a kernel for every arch of TORCH_CUDA_ARCH_LIST (the arches torch was built for:
    the fatbin reader lists the SASS it made), and torch.utils.cpp_extension builds and imports
    a CUDA extension against the headers of the libraries torch loads, linking -lcublas and
    -lnccl through the image's link names (LIBRARY_PATH), and calls both (runs it on a GPU)."""
    expect = ctx["expect"]
    if expect.get("flavour") != "devel" or not is_cuda(expect):
        pytest.skip("not applicable: a CUDA devel image builds CUDA extensions")
    arch_list = ctx["image"]["env"].get("TORCH_CUDA_ARCH_LIST", "")
    if not arch_list:
        fail("TORCH_CUDA_ARCH_LIST is not set: torch.utils.cpp_extension cannot pick the arches")
    label = labels(ctx).get(ARCH_LIST_LABEL, "").split()
    try:
        _, wanted = nvcc_probe.gencode(arch_list)
    except nvcc_probe.ArchListError as exc:
        fail(str(exc))
    if wanted != label:
        fail(f"TORCH_CUDA_ARCH_LIST {arch_list!r} is not the arch list torch has: {label}")
    version = host.run("nvcc --version")
    minor = ".".join(str(expect.get("cuda", "")).split(".")[:2])
    if version.rc != 0:
        fail("no nvcc on PATH: a CUDA devel image compiles CUDA code")
    if f"release {minor}," not in version.stdout:
        fail(f"nvcc is not CUDA {minor}: {version.stdout.strip().splitlines()[-1:]}")
    try:
        lib = nvcc_probe.compile_and_scan(host, python, "nvcc", arch_list)
    except RuntimeError as exc:
        fail(str(exc))
    if lib["sass"] != wanted:
        fail(f"nvcc made SASS for {lib['sass']}, TORCH_CUDA_ARCH_LIST asks for {wanted}")
    result = host.run(f"cd /tmp && timeout 900 {python} -c {shlex.quote(_CUDA_EXTENSION)}")
    if result.rc != 0:
        tail = (result.stderr.strip() or result.stdout.strip())[-800:]
        fail(f"torch.utils.cpp_extension could not build a CUDA extension: {tail}")
    ran = [ln for ln in result.stdout.splitlines() if ln.startswith("ran on")]
    linked = [ln for ln in result.stdout.splitlines() if ln.startswith("linked ")]
    detail(f"nvcc {minor}: a kernel with SASS {' '.join(lib['sass'])}")
    detail(f"CUDA extension built and imported{'; ' + ran[0] if ran else ' (no GPU: not run)'}")
    detail(f"it {linked[0] if linked else 'linked -lcublas -lnccl'} (LIBRARY_PATH link names)")
