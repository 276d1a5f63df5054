"""Verify checks, last: the image's configuration - NVIDIA_* environment (and this host's
driver, with a GPU), labels and the cell hash, a non-root user, and the supply chain record."""

from __future__ import annotations

from typing import Any

import pytest

from builder.facts.cuda import COMPAT_LIB_GLOB
from builder.judgement.registry import check
from builder.judgement.severity import BLOCK
from builder.nvidia_require.syntax import parse_require
from builder.spec.labels import (
    ACCELERATOR_LABEL,
    ARCH_LIST_LABEL,
    CELL_HASH_LABEL,
    CELL_LABEL,
    CUDA_LABEL,
    DRIVER_MIN_LABEL,
    FLAVOUR_LABEL,
    OCI_REF_NAME_LABEL,
    OS_LABEL,
    PYTHON_LABEL,
    TORCH_LABEL,
)
from builder.verify.agree import disagreements
from builder.verify.host_compat import compat_claim_problem, verdict_here
from builder.verify.suite.common import Detail, fail, is_cuda, labels
from builder.verify.suite.conftest import run_json


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


@check("labels", "verify", summary="labels present and as the matrix says; cell hash")
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
    if have[CELL_HASH_LABEL] != expect["cell_hash"]:
        fail(
            f"label {CELL_HASH_LABEL} is {have[CELL_HASH_LABEL]}, the matrix cell hashes to "
            f"{expect['cell_hash']}: the image is stale, rebuild it"
        )
    detail(f"{len(expect['labels'])} labels as the matrix says; cell hash {expect['cell_hash']}")


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
