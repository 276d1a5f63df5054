"""The checks of `trainimg verify`, each a named test whose message says what to do.

Three sources meet here: the matrix cell (ctx["expect"], source "matrix"; or only the labels
when the cell is not in this matrix), the image's labels and configuration (ctx["image"]), and
the running container (the `host`). A check that cannot apply (no GPU on this host, a CPU cell)
is SKIPPED with the reason; it never passes in its place.

Each test is registered once as a verify check (`@check(name, "verify")`, name = the test's name
without `test_`): `trainimg verify --help`, docs/verify.md's table and this file are held to one
another by tests/verify/test_report.py. One file on purpose, over 400 lines: pytest runs a
file's tests in the order they are written, and that order is the report's (versions, GPU code,
training, image configuration); several files would run alphabetically. The checks also share
the three-way comparison (`_same`) and the label helpers.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Callable
from typing import Any, NoReturn

import pytest
import testinfra

from builder import arches as coverage
from builder.errors import TrainimgError
from builder.facts.cuda import COMPAT_LIB_GLOB
from builder.judgement.registry import check
from builder.judgement.severity import BLOCK
from builder.labels import (
    ACCELERATOR_LABEL,
    ARCH_LIST_LABEL,
    CELL_HASH_LABEL,
    CELL_LABEL,
    CUDA_LABEL,
    DRIVER_MIN_LABEL,
    FLAVOUR_LABEL,
    GCC_LABEL,
    GPUS_LABEL,
    OCI_REF_NAME_LABEL,
    OS_LABEL,
    PYTHON_LABEL,
    TORCH_LABEL,
    TRAINER_VERSION_LABEL,
)
from builder.nvidia_require.syntax import parse_require
from builder.sbom.agree import disagreements
from builder.verify import nvcc_probe
from builder.verify.host_compat import compat_claim_problem, verdict_here
from builder.verify.scan import parse_output, reader_argv
from builder.verify.suite.conftest import run_json

TRAIN_TIMEOUT = 900  # seconds per preset; coreutils `timeout` inside the container
Detail = Callable[[str], None]


def fail(message: str) -> NoReturn:
    pytest.fail(message, pytrace=False)


def labels(ctx: dict[str, Any]) -> dict[str, str]:
    return dict(ctx["image"]["labels"])


def is_cuda(expect: dict[str, Any]) -> bool:
    return expect.get("accelerator") == "cuda"


def _same(
    what: str, inside: object, label_key: str | None, ctx: dict[str, Any], matrix_value: object
) -> None:
    """inside == label == matrix, with a message naming the one that differs."""
    lab = labels(ctx).get(label_key) if label_key else None
    source = ctx["expect"].get("source")
    if label_key is not None and lab is None:
        fail(f"label {label_key} is missing from the image")
    if label_key is not None and str(inside) != lab:
        fail(f"{what} in the image is {inside}, but label {label_key} says {lab}")
    if source == "matrix" and matrix_value is not None and str(inside) != str(matrix_value):
        fail(
            f"{what} in the image is {inside}, but the matrix cell {ctx['expect']['cell']} "
            f"says {matrix_value}"
        )


@check("os_release", "verify", summary="/etc/os-release is the cell's OS")
def test_os_release(facts: dict[str, Any], expect: dict[str, Any], detail: Detail) -> None:
    osr = facts.get("os_release") or {}
    want_id, want_version = expect.get("os_release") or ("", "")
    if not want_id:
        pytest.skip(f"no os-release expectation for OS {expect.get('os')!r} (not a matrix OS)")
    got = f"{osr.get('ID')} {osr.get('VERSION_ID')}"
    if osr.get("ID") != want_id or not str(osr.get("VERSION_ID", "")).startswith(want_version):
        fail(f"/etc/os-release says {got}, but OS {expect['os']} means {want_id} {want_version}")
    detail(osr.get("PRETTY_NAME", got))


@check("python_version", "verify", summary="Python as label and matrix say")
def test_python_version(facts: dict[str, Any], ctx: dict[str, Any], detail: Detail) -> None:
    minor = ".".join(facts["python"].split(".")[:2])
    _same("Python", minor, PYTHON_LABEL, ctx, ctx["expect"].get("python"))
    detail(f"Python {facts['python']} ({facts['executable']})")


@check("torch_version", "verify", summary="torch.__version__ as label and matrix say")
def test_torch_version(facts: dict[str, Any], ctx: dict[str, Any], detail: Detail) -> None:
    if "torch" not in facts:
        fail(f"torch does not import in the image: {facts.get('torch_error')}")
    _same("torch", facts["torch"], TORCH_LABEL, ctx, ctx["expect"].get("torch"))
    detail(f"torch {facts['torch']}")


@check(
    "cuda_version",
    "verify",
    summary="torch.version.cuda == 12.8 for cu128 (None for CPU cells)",
)
def test_cuda_version(facts: dict[str, Any], ctx: dict[str, Any], detail: Detail) -> None:
    expect = ctx["expect"]
    got = facts.get("torch_cuda")
    if not is_cuda(expect):
        if got is not None:
            fail(f"a CPU cell, but torch is a CUDA {got} build")
        if CUDA_LABEL in labels(ctx):
            fail(f"a CPU cell, but label {CUDA_LABEL} says {labels(ctx)[CUDA_LABEL]}")
        detail("CPU build: torch.version.cuda is None, as a CPU cell should be")
        return
    want = expect.get("torch_cuda")
    if got != want:
        fail(f"torch.version.cuda is {got}, but the cell's CUDA {expect.get('cuda')} needs {want}")
    _same("CUDA", expect.get("cuda"), CUDA_LABEL, ctx, expect.get("cuda"))
    env_cuda = ctx["image"]["env"].get("CUDA_VERSION")
    if env_cuda != expect.get("cuda"):
        fail(f"CUDA_VERSION is {env_cuda}, the cell says {expect.get('cuda')}")
    detail(f"torch.version.cuda == {got}; CUDA_VERSION={env_cuda}")


@check(
    "gcc_version",
    "verify",
    summary="the cell's gcc (devel; runtime images that carry one for torch.compile)",
)
def test_gcc_version(host: Any, ctx: dict[str, Any], detail: Detail) -> None:
    expect = ctx["expect"]
    result = host.run("gcc -dumpfullversion")
    if expect.get("flavour") != "devel":
        if result.rc != 0:
            pytest.skip(
                f"not applicable: this {expect.get('flavour')} image ships no compiler "
                "(train_compile says what that costs)"
            )
        major = result.stdout.strip().split(".")[0]
        if expect.get("gcc") and major != expect.get("gcc"):
            fail(f"gcc {result.stdout.strip()} in the image, the cell says gcc {expect['gcc']}")
        detail(f"gcc {result.stdout.strip()} (for torch.compile)")
        return
    if result.rc != 0:
        fail(f"gcc does not run in a devel image: {result.stderr.strip()[-300:]}")
    major = result.stdout.strip().split(".")[0]
    _same("gcc major", major, GCC_LABEL, ctx, expect.get("gcc"))
    detail(f"gcc {result.stdout.strip()}")


@check("trainer_version", "verify", summary="the bundled trainer is this tree's")
def test_trainer_version(
    trainer_info: dict[str, Any], facts: dict[str, Any], expect: dict[str, Any], detail: Detail
) -> None:
    got = trainer_info.get("trainer_version")
    want = expect.get("trainer_version")
    if trainer_info.get("torch") != facts.get("torch"):
        fail(
            f"`trainer info` reports torch {trainer_info.get('torch')}, the image's Python "
            f"imports {facts.get('torch')}"
        )
    if want is None:
        pytest.skip(
            f"trainer {got} found, but nothing says which version to expect (no label "
            f"{TRAINER_VERSION_LABEL} and no trainer/ beside this trainimg)"
        )
    if got != want:
        fail(f"the bundled trainer is {got}, expected {want}: rebuild the image from this tree")
    detail(f"trainer {got}")


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
    promised = _promised(ctx)
    every = core["sass_in_every_container"]
    missing = [a for a in promised if a not in every]
    if missing:
        fail(
            f"libtorch_cuda.so: {' '.join(missing)} SASS missing from some of its "
            f"{core['containers']} kernel modules (every module has: {' '.join(every)})"
        )
    targets = labels(ctx).get(GPUS_LABEL, "").split()
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
    # Every other CUDA library, judged by how it picks its kernels
    # (builder/facts/kernel_dispatch.py): per-architecture sets need code for the GPU in at
    # least one module, a uniform arch list in every module.
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
    if targets:
        detail(f"native SASS for every target GPU: {', '.join(targets)}")
    detail(
        f"libtorch_cuda.so: {core['containers']} modules, all with {' '.join(every)}"
        + (f"; {'; '.join(counts)}" if counts else "")
    )


def _train(
    host: Any,
    python: str,
    ctx: dict[str, Any],
    trainer_info: dict[str, Any],
    preset: str,
    detail: Detail,
    *,
    compile_: bool = False,
) -> None:
    gpu = ctx["gpu"]
    device = "cuda" if gpu["attached"] else "cpu"
    if device == "cuda":
        devs = trainer_info.get("devices") or []
        if not devs:
            fail(
                f"GPUs attached ({gpu['reason']}) but torch sees none "
                f"(cuda_available={trainer_info.get('cuda_available')})"
            )
        if preset != "bf16" and not devs[0].get("fp8"):
            pytest.skip(
                f"{devs[0]['name']} (CC {devs[0]['compute_capability']}) has no FP8 "
                "tensor cores (sm_89+ needed); the BF16 step covers this GPU"
            )
    elif preset != "bf16" and not (trainer_info.get("fp8") or {}).get("scaled_mm_cpu"):
        pytest.skip(
            f"torch {trainer_info.get('torch')} cannot run FP8 matmuls on the CPU "
            "(torch._scaled_mm on CPU tensors needs torch >= 2.13) and no GPU is attached: "
            "the FP8 step runs only on an sm_89+ GPU"
        )
    steps = int(ctx["train"]["steps"])
    fp8 = preset != "bf16"
    # The tiny model's Linears are all below torchao's size filter, which `auto` applies on
    # CUDA: without `never` an FP8 check on a GPU would pass having trained in BF16 alone.
    size_filter = "--set precision.fp8_size_filter=never " if fp8 else ""
    name = f"{preset}-compile" if compile_ else preset
    metrics = f"/tmp/trainimg-verify-{name}.jsonl"  # noqa: S108 - the container's /tmp
    cmd = (
        f"rm -f {metrics} && cd /tmp && timeout {TRAIN_TIMEOUT} {python} -m trainer train "
        f"--preset {preset} {'--compile ' if compile_ else ''}{size_filter}"
        f"--model tiny --data synthetic --steps {steps} --log-interval 1 --eval-interval 0 "
        f"--device {device} --metrics-file {metrics}"
    )
    result = host.run(cmd)
    if result.rc == 124:
        fail(f"the bundled trainer ran over {TRAIN_TIMEOUT}s for {steps} {preset} steps")
    if result.rc != 0:
        tail = (result.stderr.strip() or result.stdout.strip())[-800:]
        fail(f"the bundled trainer failed ({preset} on {device}, exit {result.rc}): {tail}")
    text = host.file(metrics).content_string if host.file(metrics).exists else ""
    records = [json.loads(ln) for ln in text.splitlines() if ln.strip().startswith("{")]
    losses = [float(r["loss"]) for r in records if r.get("event") == "train" and "loss" in r]
    if len(losses) < 2:
        fail(f"{preset}: the trainer wrote {len(losses)} loss values to {metrics}; need >= 2")
    bad = [x for x in losses if not math.isfinite(x)]
    if bad:
        fail(f"{preset}: non-finite loss {bad[0]} in {len(losses)} steps")
    if not losses[-1] < losses[0]:
        fail(
            f"{preset}: loss did not fall over {len(losses)} steps "
            f"({losses[0]:.4f} -> {losses[-1]:.4f})"
        )
    where = (
        f"on the GPU ({gpu['reason']})"
        if device == "cuda"
        else "on the CPU, not a GPU (none attached: see nvidia_smi)"
    )
    how = " under torch.compile (Inductor)" if compile_ else ""
    if fp8:
        how += _fp8_evidence(preset, records)
    detail(f"{preset}: {len(losses)} steps{how} {where}; loss {losses[0]:.4f} -> {losses[-1]:.4f}")


def _fp8_evidence(preset: str, records: list[dict[str, Any]]) -> str:
    """That the FP8 steps really ran FP8 matmuls: converted layers and measured, finite amax
    statistics in every train record (not a BF16 run under an FP8 name)."""
    train = [r for r in records if r.get("event") == "train"]
    layers = [int(r.get("fp8_layers") or 0) for r in train]
    if not layers or min(layers) < 1:
        fail(f"{preset}: no FP8 layers in the trainer's records (fp8_layers: {layers})")
    amax = [r.get("fp8_input_amax_max") for r in train]
    finite = [float(a) for a in amax if a is not None and math.isfinite(float(a))]
    if len(finite) != len(amax):
        fail(f"{preset}: FP8 amax statistics missing or not finite: {amax}")
    return f" with {min(layers)} FP8 layers (input amax up to {max(finite):.3g})"


@check("train_bf16", "verify", summary="a few BF16 trainer steps: finite, falling loss")
def test_train_bf16(
    host: Any, python: str, ctx: dict[str, Any], trainer_info: dict[str, Any], detail: Detail
) -> None:
    _train(host, python, ctx, trainer_info, "bf16", detail)


@check("train_fp8_fwd", "verify", summary="a few FP8-fwd trainer steps: finite, falling loss")
def test_train_fp8_fwd(
    host: Any, python: str, ctx: dict[str, Any], trainer_info: dict[str, Any], detail: Detail
) -> None:
    _train(host, python, ctx, trainer_info, "fp8-fwd", detail)


@check(
    "train_compile",
    "verify",
    summary="BF16 steps under torch.compile: compiler and Python headers present",
)
def test_train_compile(
    host: Any, python: str, ctx: dict[str, Any], trainer_info: dict[str, Any], detail: Detail
) -> None:
    """torch.compile works: Inductor (and, on a GPU, Triton's launcher) builds C/C++ code at run
    time, so the image must carry the compiler and the Python headers."""
    compilers = host.run("command -v gcc && command -v g++")
    if compilers.rc != 0:
        fail("torch.compile needs gcc and g++ in the image (Inductor builds C++ at run time)")
    headers = host.run(
        f"{python} -c 'import sysconfig, os, sys; "
        "sys.exit(0 if os.path.exists(os.path.join("
        'sysconfig.get_paths()["include"], "Python.h")) else 1)\''
    )
    if headers.rc != 0:
        fail("torch.compile needs the Python headers (Python.h) in the image")
    _train(host, python, ctx, trainer_info, "bf16", detail, compile_=True)


# OpenShift's restricted SCC: an arbitrary uid in group 0, with no passwd entry.
ANY_UID = "12345:0"
ANY_UID_CKPT = "/ckpt/trainimg-verify-any-uid"
_WHO = (
    "import getpass, os, pathlib; user = getpass.getuser(); home = pathlib.Path.home(); "
    "probe = home / '.trainimg-any-uid'; probe.write_text('x'); probe.unlink(); "
    "print(os.getuid(), os.getgid(), user, home)"
)


def _any_uid_host(ctx: dict[str, Any]) -> Any:
    """The same container, commands run as ANY_UID (`podman|docker exec -u`)."""
    return testinfra.get_host(f"{ctx['engine']}://{ANY_UID}@{ctx['container']}")


ANY_UID_STEPS = 4  # two, a checkpoint, two more: the point is who runs them, not how many


def _any_uid_train(
    host: Any, python: str, device: str, tmp: str, name: str, extra: str
) -> list[dict[str, Any]]:
    steps = ANY_UID_STEPS
    metrics = f"{tmp}/{name}.jsonl"
    result = host.run(
        f"cd /workspace && TMPDIR={tmp} timeout {TRAIN_TIMEOUT} {python} -m trainer train "
        f"--preset bf16 --compile --model tiny --data synthetic --steps {steps} "
        f"--ckpt-dir {ANY_UID_CKPT} --log-interval 1 --eval-interval 0 --device {device} "
        f"--metrics-file {metrics} {extra}"
    )
    if result.rc != 0:
        tail = (result.stderr.strip() or result.stdout.strip())[-800:]
        fail(f"as uid {ANY_UID}, the trainer's {name} run failed (exit {result.rc}): {tail}")
    text = host.run(f"cat {metrics}").stdout
    return [json.loads(ln) for ln in text.splitlines() if ln.strip().startswith("{")]


@check(
    "train_any_uid",
    "verify",
    summary="as an arbitrary uid in group 0: --compile steps, a checkpoint, a resume",
)
def test_train_any_uid(
    python: str, ctx: dict[str, Any], trainer_info: dict[str, Any], detail: Detail
) -> None:
    """OpenShift's restricted SCC runs an image as an arbitrary uid in group 0 with no passwd
    entry: torch.compile must still find a user name and a cache (getpass reads USER, Triton
    and Inductor write under HOME and /tmp), and /ckpt must take a checkpoint and give it back.
    Inductor's cache goes to a temporary directory of the check's own, so what the checks
    before it cached as uid 1000 in this container is not in its way."""
    if ctx["engine"] not in ("podman", "docker"):
        pytest.skip(f"not applicable: the {ctx['engine']} backend cannot run as another uid")
    host = _any_uid_host(ctx)
    who = host.run(f"{python} -c {shlex.quote(_WHO)}")
    if who.rc != 0:
        last = (who.stderr.strip().splitlines() or ["(no output)"])[-1]
        fail(f"as uid {ANY_UID}, Python cannot name a user or write HOME: {last}")
    uid, gid, user, home = who.stdout.split()
    if (uid, gid) != tuple(ANY_UID.split(":")):
        fail(f"exec as {ANY_UID} ran as {uid}:{gid}")
    device = "cuda" if ctx["gpu"]["attached"] else "cpu"
    tmp = host.run("mktemp -d").stdout.strip()
    steps = ANY_UID_STEPS
    try:
        host.run(f"rm -rf {ANY_UID_CKPT}")
        first = _any_uid_train(host, python, device, tmp, "first", f"--stop-at {steps // 2}")
        owner = host.run(f"stat -c %u {ANY_UID_CKPT}/step_*").stdout.split()
        second = _any_uid_train(host, python, device, tmp, "resumed", "--resume")
    finally:
        host.run(f"rm -rf {tmp} {ANY_UID_CKPT}")
    trained = [[r["step"] for r in rs if r.get("event") == "train"] for rs in (first, second)]
    if trained[0] != list(range(1, steps // 2 + 1)):
        fail(f"the first run trained steps {trained[0]}, not 1..{steps // 2}")
    if trained[1] != list(range(steps // 2 + 1, steps + 1)):
        fail(f"the resumed run trained steps {trained[1]}, not {steps // 2 + 1}..{steps}")
    if not owner or set(owner) != {uid}:
        fail(f"the checkpoint in {ANY_UID_CKPT} belongs to uid {owner}, not {uid}")
    detail(
        f"uid {uid} gid {gid} (getpass: {user}, HOME {home}): steps 1..{steps // 2} under "
        f"torch.compile, checkpointed to {ANY_UID_CKPT}, resumed to step {steps}"
    )


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
    "__global__ void twice_kernel(float *x, int n) {"
    " int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }\\n"
    "torch::Tensor twice(torch::Tensor x) { auto y = x.clone(); int n = y.numel();"
    " twice_kernel<<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), n); return y; }\\n"
)
mod = load_inline(name="trainimg_cuda_probe", functions=["twice"],
                  cpp_sources=["torch::Tensor twice(torch::Tensor x);"], cuda_sources=[cuda],
                  build_directory=tempfile.mkdtemp())
if torch.cuda.is_available():
    x = torch.arange(4.0, device="cuda")
    assert torch.equal(mod.twice(x), x * 2)
    print("ran on", torch.cuda.get_device_name(0))
print(mod.__file__)
"""


@check(
    "cuda_extension",
    "verify",
    summary="devel CUDA: nvcc compiles a kernel for the arch list; a CUDA extension builds",
)
def test_cuda_extension(host: Any, python: str, ctx: dict[str, Any], detail: Detail) -> None:
    """A CUDA devel image builds CUDA extensions without a GPU: its nvcc is the cell's CUDA,
    compiles a kernel for every arch of TORCH_CUDA_ARCH_LIST (the arches torch was built for:
    the fatbin reader lists the SASS it made), and torch.utils.cpp_extension builds and imports
    a CUDA extension against the headers of the libraries torch loads (runs it on a GPU)."""
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
    detail(f"nvcc {minor}: a kernel with SASS {' '.join(lib['sass'])}")
    detail(f"CUDA extension built and imported{'; ' + ran[0] if ran else ' (no GPU: not run)'}")


@check(
    "nvidia_environment",
    "verify",
    summary="NVIDIA_REQUIRE_CUDA (claims only what the image has) and NVIDIA_DRIVER_CAPABILITIES; "
    "with a GPU, this host's driver runs the image",
)
def test_nvidia_environment(
    host: Any, facts: dict[str, Any], ctx: dict[str, Any], detail: Detail
) -> None:
    config_env = ctx["image"]["env"]
    inside = facts.get("env") or {}
    nvidia = ("NVIDIA_REQUIRE_CUDA", "NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_VISIBLE_DEVICES")
    if not is_cuda(ctx["expect"]):
        present = [k for k in nvidia if k in config_env or k in inside]
        if present:
            fail(f"a CPU cell, but the image sets {', '.join(present)}")
        detail("CPU cell: no NVIDIA_* variables, as it should be")
        return
    for key in nvidia:
        if key not in config_env:
            fail(f"{key} is not set in the image configuration")
        if inside.get(key) != config_env[key]:
            fail(
                f"{key} inside the container ({inside.get(key)!r}) differs from the image "
                f"configuration ({config_env[key]!r})"
            )
    req = config_env["NVIDIA_REQUIRE_CUDA"]
    try:
        parse_require(req, strict=True)
    except Exception as exc:  # a malformed requirement is the finding
        fail(f"NVIDIA_REQUIRE_CUDA does not parse: {exc}")
    expect = ctx["expect"]
    want = expect.get("nvidia_require_cuda")
    if want is not None and req != want:
        fail(
            f"NVIDIA_REQUIRE_CUDA differs from what CUDA {expect['cuda']} requires: "
            f"{req[:80]}... != {want[:80]}..."
        )
    first = req.split()[0]
    if first != f"cuda>={expect.get('torch_cuda')}":
        fail(
            f"NVIDIA_REQUIRE_CUDA starts with {first}, the cell's CUDA needs "
            f"cuda>={expect.get('torch_cuda')}"
        )
    # where cuda-compat puts libcuda (a test may point at its own stand-in)
    compat_libs = host.run(f"ls {ctx.get('compat_libs', COMPAT_LIB_GLOB)}").rc == 0
    claim = compat_claim_problem(req, compat_libs)
    if claim:
        fail(claim)
    here = verdict_here(ctx)
    if here is not None and here.severity is BLOCK:
        fail(
            "this host's driver does not run the image: "
            + "; ".join(f"[{f.reason}] {f.message}" for f in here.findings if f.severity is BLOCK)
        )
    caps = set(config_env["NVIDIA_DRIVER_CAPABILITIES"].split(","))
    if not {"compute", "utility"} <= caps and "all" not in caps:
        fail(
            f"NVIDIA_DRIVER_CAPABILITIES={config_env['NVIDIA_DRIVER_CAPABILITIES']} lacks "
            "compute,utility (CUDA and nvidia-smi need both)"
        )
    detail(
        f"{first} (+{len(req.split()) - 1} brand windows, cuda-compat "
        f"{'in the image' if compat_libs else 'absent'}); capabilities "
        f"{config_env['NVIDIA_DRIVER_CAPABILITIES']}"
        + (f"; on this host: {here.status} ({', '.join(here.codes)})" if here else "")
    )


@check("labels", "verify", summary="labels present and as the matrix says; content hash")
def test_labels(ctx: dict[str, Any], detail: Detail) -> None:
    have = labels(ctx)
    expect = ctx["expect"]
    required = [
        CELL_LABEL,
        OS_LABEL,
        ACCELERATOR_LABEL,
        FLAVOUR_LABEL,
        PYTHON_LABEL,
        TORCH_LABEL,
        CELL_HASH_LABEL,
        OCI_REF_NAME_LABEL,
    ]
    if is_cuda(expect):
        required += [CUDA_LABEL, ARCH_LIST_LABEL, DRIVER_MIN_LABEL]
    missing = [k for k in required if k not in have]
    if missing:
        fail(f"labels missing: {', '.join(missing)}")
    if have[CELL_LABEL] != have[OCI_REF_NAME_LABEL]:
        fail(
            f"label {CELL_LABEL} ({have[CELL_LABEL]}) and {OCI_REF_NAME_LABEL} "
            f"({have[OCI_REF_NAME_LABEL]}) disagree"
        )
    if expect.get("source") != "matrix":
        detail(
            f"{len(have)} labels present and consistent; cell {have[CELL_LABEL]} is not in "
            "this matrix, so they were not compared with it"
        )
        return
    wrong = [
        f"{k}={have.get(k)!r} (matrix: {v!r})"
        for k, v in expect["labels"].items()
        if have.get(k) != v
    ]
    if wrong:
        fail(f"{len(wrong)} labels differ from the matrix: " + "; ".join(wrong[:4]))
    if have[CELL_HASH_LABEL] != expect["content_hash"]:
        fail(
            f"label {CELL_HASH_LABEL} is {have[CELL_HASH_LABEL]}, the matrix cell hashes to "
            f"{expect['content_hash']}: the image is stale, rebuild it"
        )
    detail(
        f"{len(expect['labels'])} labels as the matrix says; content hash {expect['content_hash']}"
    )


@check("default_user_not_root", "verify", summary="USER is not root, and inside it is not uid 0")
def test_default_user_not_root(facts: dict[str, Any], ctx: dict[str, Any], detail: Detail) -> None:
    user = str(ctx["image"].get("user") or "")
    name = user.split(":", 1)[0]
    if name in ("", "0", "root"):
        fail(
            f"the image's default user is {user or 'unset (root)'}: set USER to an "
            "unprivileged uid (trainimg images use 1000)"
        )
    if facts.get("uid") == 0:
        fail(f"the image says USER {user}, but commands run as uid 0 inside")
    detail(f"USER {user}; runs as uid {facts.get('uid')} ({facts.get('user')})")


DISTRIBUTIONS = (
    "import importlib.metadata as md, json; "
    "print(json.dumps({d.metadata['Name']: d.version for d in md.distributions()}))"
)


@check(
    "supply_chain",
    "verify",
    summary="labels, lock record, SBOM and the installed wheels agree",
)
def test_supply_chain(host: Any, python: str, ctx: dict[str, Any], detail: Detail) -> None:
    supply = ctx.get("supply") or {}
    record = supply.get("record")
    if record is None:
        pytest.skip(supply.get("reason") or "no lock record names this image")
    installed = run_json(host, f"{python} -c %s", DISTRIBUTIONS)
    problems = disagreements(ctx["image"]["id"], labels(ctx), record, installed, supply.get("sbom"))
    if problems:
        fail(f"{len(problems)} disagreement(s): " + "; ".join(problems[:5]))
    what = "labels, lock record and installed wheels"
    detail(
        f"{what}{' and the SBOM' if supply.get('sbom') else ''} agree ({len(installed)} "
        f"distributions, lock {supply.get('lock')})"
    )
