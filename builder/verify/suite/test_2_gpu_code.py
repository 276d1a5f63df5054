"""Verify checks, second: GPU code - nvidia-smi with GPUs attached, the arch flags torch was
built with, and the fatbin scan of every CUDA library against the GPUs the cell targets."""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest

from builder.arches import coverage
from builder.arches.scan import parse_output, reader_argv
from builder.errors import TrainimgError
from builder.judgement.registry import check
from builder.spec.labels import ARCH_LIST_LABEL, GPUS_LABEL
from builder.verify.suite.common import Detail, fail, is_cuda, labels


@check("nvidia_smi", "verify", summary="nvidia-smi lists >= 1 GPU (skipped: no GPU here)")
def test_nvidia_smi(host: Any, ctx: dict[str, Any], detail: Detail) -> None:
    gpu = ctx["gpu"]
    if not gpu["attached"]:
        pytest.skip(gpu["reason"])
    result = host.run("timeout 60 nvidia-smi -L")
    if result.rc != 0:
        fail(
            f"nvidia-smi failed (exit {result.rc}) with GPUs attached ({gpu['reason']}): "
            f"{(result.stderr or result.stdout).strip()[-400:]}"
        )
    gpus = [ln for ln in result.stdout.splitlines() if re.match(r"^GPU \d+: ", ln)]
    if not gpus:
        fail(f"nvidia-smi lists no GPU: {result.stdout.strip()[-400:]!r}")
    detail("; ".join(gpus))


def _promised(ctx: dict[str, Any]) -> list[str]:
    expect = ctx["expect"]
    label = labels(ctx).get(ARCH_LIST_LABEL, "").split()
    if label == ["unknown"] and expect.get("arch_list") is None:
        fail(f"label {ARCH_LIST_LABEL} says unknown: no fact records the arch list to check")
    if expect.get("source") == "matrix" and label != list(expect.get("arch_list") or []):
        fail(
            f"label {ARCH_LIST_LABEL} says {' '.join(label) or '(nothing)'}, the matrix "
            f"promises {' '.join(expect.get('arch_list') or [])}"
        )
    promised = list(expect.get("arch_list") or label)
    if not promised:
        fail("a CUDA cell without any promised arch list (label and matrix are empty)")
    return promised


@check(
    "sm_kernels_arch_flags",
    "verify",
    summary="torch._C._cuda_getArchFlags() has every promised arch",
)
def test_sm_kernels_arch_flags(facts: dict[str, Any], ctx: dict[str, Any], detail: Detail) -> None:
    if not is_cuda(ctx["expect"]):
        if facts.get("has_arch_flags"):
            fail("a CPU cell, but torch has CUDA arch flags: it is a CUDA build")
        pytest.skip(
            "not applicable: a CPU cell has no CUDA kernels "
            "(torch._C._cuda_getArchFlags is absent in CPU builds)"
        )
    if not facts.get("has_arch_flags"):
        fail(f"torch {facts.get('torch')} has no torch._C._cuda_getArchFlags: not a CUDA build")
    flags = (facts.get("arch_flags") or "").split()
    missing = [a for a in _promised(ctx) if a not in flags]
    if missing:
        fail(f"torch._C._cuda_getArchFlags() lacks {' '.join(missing)} (it has {' '.join(flags)})")
    detail(f"arch flags: {' '.join(flags)}")


@check(
    "sm_kernels_fatbin_scan",
    "verify",
    summary="every CUDA library has code for every target GPU, by its rule",
)
def test_sm_kernels_fatbin_scan(
    host: Any, python: str, ctx: dict[str, Any], facts: dict[str, Any], detail: Detail
) -> None:
    argv = reader_argv(python, ctx["scan_roots"])
    result = host.run(" ".join(shlex.quote(a) for a in argv))
    if result.rc != 0:
        fail(f"the fatbin reader failed in the container: {result.stderr.strip()[-500:]}")
    scan = parse_output(result.stdout, ctx["image"]["ref"])
    libs = {lib["path"].rsplit("/", 1)[-1]: lib for lib in scan["libraries"]}
    if not is_cuda(ctx["expect"]):
        torch_libs = sorted(n for n in libs if n.startswith(("libtorch", "libc10")))
        if torch_libs:
            fail(f"a CPU cell, but torch carries CUDA kernels: {', '.join(torch_libs)}")
        extra = f"; other libraries with device code: {', '.join(sorted(libs))}" if libs else ""
        pytest.skip(
            f"not applicable: a CPU cell, and torch has no CUDA libraries (scanned "
            f"{' '.join(ctx['scan_roots'])}){extra}"
        )
    if scan["errors"]:
        fail(
            "unreadable CUDA libraries: "
            + "; ".join(f"{e['path']}: {e['error']}" for e in scan["errors"][:3])
        )
    core = libs.get("libtorch_cuda.so")
    if core is None:
        fail(f"no libtorch_cuda.so with device code under {' '.join(ctx['scan_roots'])}")
    targets = labels(ctx).get(GPUS_LABEL, "").split()
    every = _core_library(core, ctx, facts, targets)
    counts = _other_libraries(libs, targets)
    if targets:
        detail(f"native SASS for every target GPU: {', '.join(targets)}")
    detail(
        f"libtorch_cuda.so: {core['containers']} modules, all with {' '.join(every)}"
        + (f"; {'; '.join(counts)}" if counts else "")
    )


def _core_library(
    core: dict[str, Any], ctx: dict[str, Any], facts: dict[str, Any], targets: list[str]
) -> list[str]:
    """libtorch_cuda.so: SASS for every promised arch in every kernel module, native code for
    every GPU the cell targets, and the arch flags torch reports; returns its common arches."""
    promised = _promised(ctx)
    every: list[str] = core["sass_in_every_container"]
    missing = [a for a in promised if a not in every]
    if missing:
        fail(
            f"libtorch_cuda.so: {' '.join(missing)} SASS missing from some of its "
            f"{core['containers']} kernel modules (every module has: {' '.join(every)})"
        )
    short = []
    for key in targets:
        try:
            gpu_name, cc = coverage.parse_gpu(key)
        except TrainimgError as exc:
            fail(f"label {GPUS_LABEL} names {key!r}: {exc}")
        cov = coverage.library_coverage(core, cc)
        if cov.verdict != "yes":
            short.append(f"{gpu_name}: {cov.explain()}")
    if short:
        fail(
            "libtorch_cuda.so does not run natively on every GPU the cell targets: "
            + "; ".join(short)
        )
    flags = (facts.get("arch_flags") or "").split()
    if flags and flags != every:
        fail(
            f"the fatbin scan ({' '.join(every)}) disagrees with torch._C._cuda_getArchFlags() "
            f"({' '.join(flags)})"
        )
    return every


def _other_libraries(libs: dict[str, dict[str, Any]], targets: list[str]) -> list[str]:
    """Every other CUDA library, judged by how it picks its kernels
    (builder/facts/kernel_dispatch.py): per-architecture sets need code for the GPU in at
    least one module, a uniform arch list in every module. Returns a line per library."""
    blocked = []
    counts = []
    for name, lib in sorted(libs.items()):
        if name == "libtorch_cuda.so":
            continue
        covs = []
        for key in targets:
            gpu_name, cc = coverage.parse_gpu(key)
            cov = coverage.library_coverage(lib, cc)
            covs.append(cov)
            if cov.verdict == "no" and cov.blocking:
                blocked.append(f"{name} on {gpu_name}: {cov.explain()}")
        b200 = next((c for c, k in zip(covs, targets, strict=True) if k == "b200"), None)
        rule = covs[0].rule if covs else coverage.library_coverage(lib, (10, 0)).rule
        sm100 = f", {b200.native} with SASS for sm_100: {b200.verdict}" if b200 else ""
        counts.append(f"{name}: {lib['containers']} modules ({rule}{sm100})")
    if blocked:
        fail("CUDA libraries without code for a GPU the cell targets: " + "; ".join(blocked))
    return counts
