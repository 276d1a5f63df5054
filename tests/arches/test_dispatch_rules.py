"""How a library picks its kernels decides its verdict (builder/facts/kernel_dispatch.py): a
per-architecture library needs code for the GPU in one module, a uniform one in every module."""

from __future__ import annotations

import json
from pathlib import Path

from builder.arches import coverage as arches
from builder.facts import kernel_dispatch

B200 = (10, 0)
# Modules as cuBLASLt ships them: one architecture each (recorded shape, not real counts).
PER_ARCH_MODULES = [["sm_80"], ["sm_90a"], ["sm_100"], ["sm_120"], ["sm_90"], ["sm_75"]]


def lib(name: str, modules: list[list[str]]) -> dict[str, object]:
    return {"path": f"/opt/venv/lib/python3.11/site-packages/x/{name}", "per_container": modules}


def test_rules_by_file_name() -> None:
    kind = {
        name: kernel_dispatch.rule_for(f"/x/{name}").kind
        for name in (
            "libcublasLt.so.12",
            "libcublas.so.12",
            "libcudnn_engines_precompiled.so.9",
            "libcufft.so.11",
            "libcusparse.so.12",
            "libcusparseLt.so.0",
            "libtorch_cuda.so",
            "libc10_cuda.so",
            "libnccl.so.2",
            "libsomething_new.so",
        )
    }
    per_arch = {n for n, k in kind.items() if k == kernel_dispatch.PER_ARCH}
    assert per_arch == {
        "libcublasLt.so.12",
        "libcublas.so.12",
        "libcudnn_engines_precompiled.so.9",
        "libcusparse.so.12",
        "libcusparseLt.so.0",
    }
    assert kind["libcufft.so.11"] == kernel_dispatch.OPAQUE
    assert kind["libsomething_new.so"] == kernel_dispatch.UNIFORM  # unknown: the strict rule
    for rule in kernel_dispatch.DISPATCH_RULES:
        assert rule.source.ref.startswith("https://")


def test_per_arch_library_runs_when_one_module_covers_the_gpu() -> None:
    cov = arches.library_coverage(lib("libcublasLt.so.12", PER_ARCH_MODULES), B200)
    assert cov.rule == kernel_dispatch.PER_ARCH
    assert (cov.modules, cov.native, cov.missing) == (6, 1, 5)
    assert cov.verdict == "yes"
    assert cov.explain().startswith("yes: 1 of 6 kernel modules carry SASS")
    assert "5 of 6 modules hold kernels for other GPUs only" in cov.explain()
    # The same modules in a uniformly built library: 5 modules would fail on the B200.
    strict = arches.library_coverage(lib("libtorch_cuda.so", PER_ARCH_MODULES), B200)
    assert strict.verdict == "no" and strict.missing == 4
    assert strict.elsewhere == 1  # the sm_90a module: Hopper-only code, not a gap on a B200


def test_per_arch_library_without_code_for_the_gpu_does_not_run() -> None:
    hopper = [["sm_90"], ["sm_90a"], ["sm_80"]]
    cov = arches.library_coverage(lib("libcudnn_engines_precompiled.so.9", hopper), B200)
    assert cov.verdict == "no" and "none of its 3 kernel modules" in cov.explain()
    jit = arches.library_coverage(lib("libcusparse.so.12", [["sm_90"], ["compute_90"]]), B200)
    assert jit.verdict == "jit" and "PTX (compute_90)" in jit.explain()


REAL = json.loads((Path(__file__).parents[1] / "data" / "cu128_scan.json").read_text())


def real_libraries() -> list[dict[str, object]]:
    """The recorded scan of the cu128 image's libraries (origin in the file), expanded back
    into one target list per module."""
    out = []
    for entry in REAL["libraries"]:
        modules = [targets.split() for targets, n in entry["modules"] for _ in range(n)]
        out.append(
            {
                "path": "/opt/venv/lib/python3.11/site-packages/" + entry["path"],
                "per_container": modules,
            }
        )
    return out


def test_verdicts_on_the_real_cu128_libraries() -> None:
    libs = real_libraries()
    assert len(libs) == 24
    _, cc = arches.parse_gpu("b200")
    covs = {Path(str(c.path)).name: c for c in (arches.library_coverage(x, cc) for x in libs)}
    lt = covs["libcublasLt.so.12"]
    assert (lt.modules, lt.native, lt.missing) == (2918, 1362, 1555)
    assert lt.rule == kernel_dispatch.PER_ARCH and lt.verdict == "yes"
    core = covs["libtorch_cuda.so"]
    assert core.rule == kernel_dispatch.UNIFORM and core.native == core.modules == 397
    assert covs["libcufft.so.11"].verdict == "documented"  # one sm_52 helper module only
    assert covs["libnvshmem_host.so.3"].verdict == "yes"  # its .nv_fatbin: sm_100 SASS
    assert covs["libnccl.so.2"].verdict == "yes" and covs["libnccl.so.2"].elsewhere == 0
    assert covs["libcufile.so.0"].verdict == "jit"  # PTX-only module(s)
    assert covs["_C.abi3.so"].verdict == "no" and not covs["_C.abi3.so"].blocking  # torchao
    blocking_no = [n for n, c in covs.items() if c.blocking and c.verdict == "no"]
    assert blocking_no == []
    assert arches.overall(list(covs.values())) == "jit"  # runs; a few kernels JIT-compile
    # Judged uniformly, as before the rules, cuBLASLt alone would have said "does NOT run".
    by_name = {Path(str(x["path"])).name: x for x in libs}
    lt_modules: list[list[str]] = by_name["libcublasLt.so.12"]["per_container"]  # type: ignore[assignment]
    assert arches.coverage(lt.path, lt_modules, cc).verdict == "no"
    # An older GPU outside cu128's arch list: libtorch_cuda has no sm_61 SASS or PTX.
    pascal = arches.library_coverage(by_name["libtorch_cuda.so"], (6, 1))
    assert pascal.verdict == "no"
