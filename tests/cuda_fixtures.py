"""Fixtures of the verify and arches tests (a pytest plugin, taken in by tests/conftest.py): real
CUDA binaries from PyPI (downloaded once, cached under .cache/verify/), nvcc-built libraries,
NVIDIA's cuobjdump as an independent lister, and stub CUDA runtimes for importing a cu128 torch
without a GPU.

A download that is impossible (no network, PyPI refuses) skips the tests that need it with the
reason; it never lets them pass.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from tests import cuda_stubs
from tests.conftest import CACHE as TEST_CACHE

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("TRAINIMG_VERIFY_CACHE", REPO / ".cache" / "verify"))
CU128_WHEELHOUSE = TEST_CACHE / "wheelhouse-cu128"  # tests/conftest.py cu128_wheelhouse fills it
TORCH_SPEC = "torch==2.9.1"  # a cu128 build on PyPI (builder/facts/torch_builds.py)
CURAND_SPEC = "nvidia-curand-cu12==10.3.9.90"  # the cuRAND torch 2.9.1 pins; 64 MB
CUOBJDUMP_SPEC = "nvidia-cuda-cuobjdump==13.2.51"  # NVIDIA's lister, 0.3 MB
# The NCCL and NVSHMEM torch 2.9.1 pins (its wheel METADATA): both keep their device link's
# relocatable inputs (__nv_relfatbin) ahead of the .nv_fatbin the runtime loads. 322 + 125 MB.
NCCL_SPEC = "nvidia-nccl-cu12==2.27.5"
NVSHMEM_SPEC = "nvidia-nvshmem-cu12==3.3.20"
PLATFORM = ["--python-version", "3.11", "--only-binary=:all:"]
PLATFORMS = [
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
]


def _record(spec: str, wheel: Path, seconds: float) -> None:
    log = CACHE / "downloads.json"
    data = json.loads(log.read_text()) if log.exists() else {}
    data[spec] = {"wheel": wheel.name, "bytes": wheel.stat().st_size, "seconds": round(seconds, 1)}
    log.write_text(json.dumps(data, indent=2) + "\n")


def fetch_wheel(spec: str, timeout: float = 600) -> Path:
    """`pip download --no-deps SPEC` into .cache/verify/wheels; skips the test when impossible."""
    dest = CACHE / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    name = spec.split("==")[0].replace("-", "_")
    version = spec.split("==")[1]
    for where in (dest, CU128_WHEELHOUSE):  # the cu128 cell's wheelhouse holds the same wheels
        found = sorted(where.glob(f"{name}-{version}-*.whl"))
        if found:
            return found[0]
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",
        "-d",
        str(dest),
        *PLATFORM,
        spec,
    ]
    for plat in PLATFORMS:
        cmd += ["--platform", plat]
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.skip(f"download of {spec} from PyPI took over {timeout:.0f}s: not possible here")
    found = sorted(dest.glob(f"{name}-{version}-*.whl"))
    if proc.returncode != 0 or not found:
        tail = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "WARNING" not in ln][-3:]
        pytest.skip(
            f"could not download {spec} from PyPI (pip exit {proc.returncode}): {' | '.join(tail)}"
        )
    _record(spec, found[0], time.monotonic() - start)
    return found[0]


def extract(wheel: Path, members: str, into: Path) -> Path:
    """Extract the members whose names start with `members` (once); returns `into`."""
    marker = into / f".complete-{wheel.name}-{members.replace('/', '_')}"
    if marker.exists():
        return into
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            if info.filename.startswith(members):
                z.extract(info, into)
                mode = info.external_attr >> 16
                if mode & stat.S_IXUSR:
                    (into / info.filename).chmod(0o755)
    marker.write_text("ok\n")
    return into


@pytest.fixture(scope="session")
def torch_cu128() -> Path:
    """A site directory holding the torch package of PyPI's torch 2.9.1 (cu128), ~1.7 GB.

    The ~900 MB wheel is deleted after extraction to keep the cache near 1.7 GB."""
    site = CACHE / "site-torch-2.9.1"
    if (site / ".complete").exists():
        return site
    wheel = fetch_wheel(TORCH_SPEC)
    extract(wheel, "torch/", site)
    (site / ".complete").write_text(f"{wheel.name} {wheel.stat().st_size}\n")
    if wheel.parent == CACHE / "wheels":  # never a wheelhouse's own file
        wheel.unlink()
    return site


@pytest.fixture(scope="session")
def libtorch_cuda(torch_cu128: Path) -> Path:
    return torch_cu128 / "torch" / "lib" / "libtorch_cuda.so"


def wheel_file(spec: str, into: str, member: str) -> Path:
    """One file of a PyPI wheel, extracted once into .cache/verify/<into>/."""
    path = CACHE / into / member
    if not path.exists():
        extract(fetch_wheel(spec), member, CACHE / into)
    return path


@pytest.fixture(scope="session")
def libcurand() -> Path:
    return wheel_file(CURAND_SPEC, "curand-10.3.9.90", "nvidia/curand/lib/libcurand.so.10")


@pytest.fixture(scope="session")
def libnccl() -> Path:
    return wheel_file(NCCL_SPEC, "nccl-2.27.5", "nvidia/nccl/lib/libnccl.so.2")


@pytest.fixture(scope="session")
def libnvshmem_host() -> Path:
    return wheel_file(NVSHMEM_SPEC, "nvshmem-3.3.20", "nvidia/nvshmem/lib/libnvshmem_host.so.3")


@pytest.fixture(scope="session")
def cuobjdump() -> Path:
    """NVIDIA's cuobjdump from PyPI: the independent lister our reader is compared with."""
    root = CACHE / "cuobjdump-13.2.51"
    exe = root / "nvidia" / "cu13" / "bin" / "cuobjdump"
    if not exe.exists():
        extract(fetch_wheel(CUOBJDUMP_SPEC), "nvidia/", root)
    exe.chmod(0o755)
    return exe


def cuobjdump_list(exe: Path, target: Path) -> list[tuple[str, str]]:
    """[(kind, arch)] in cuobjdump's order: ('sass', 'sm_90a'), ('ptx', 'sm_120')."""
    proc = subprocess.run(
        [str(exe), "-lelf", "-lptx", str(target)], capture_output=True, text=True, timeout=600
    )
    out = []
    for line in proc.stdout.splitlines():
        kind = (
            "sass" if line.startswith("ELF file") else "ptx" if line.startswith("PTX file") else ""
        )
        if kind:
            out.append((kind, line.rsplit(".", 2)[-2]))
    return out


@pytest.fixture(scope="session")
def nvcc() -> Path:
    found = shutil.which("nvcc") or next(iter(Path("/usr/local").glob("cuda*/bin/nvcc")), None)
    if not found:
        pytest.skip("nvcc is not installed: the nvcc-built fatbin cases need a CUDA toolkit")
    return Path(found)


@pytest.fixture(scope="session")
def cuda_stub_dir(torch_cu128: Path) -> Path:
    try:
        return cuda_stubs.build(torch_cu128 / "torch", CACHE)
    except cuda_stubs.StubError as exc:
        pytest.skip(f"cannot build the stub CUDA runtime: {exc}")
