"""Verify checks, third: training - a few trainer steps in BF16, FP8 (forward) and under
torch.compile, then as an arbitrary uid in group 0 with a checkpoint and a resume."""

from __future__ import annotations

import json
import math
import shlex
from typing import Any

import pytest
import testinfra

from builder.judgement.registry import check
from builder.spec.layout import CKPT_DIR, WORKDIR
from builder.verify.suite.common import Detail, fail

TRAIN_TIMEOUT = 900  # seconds per preset; coreutils `timeout` inside the container


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
ANY_UID_CKPT = f"{CKPT_DIR}/trainimg-verify-any-uid"
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
        f"cd {WORKDIR} && TMPDIR={tmp} timeout {TRAIN_TIMEOUT} {python} -m trainer train "
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
