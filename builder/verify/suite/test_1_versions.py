"""Verify checks, first: the versions inside the image - OS, Python, torch, its CUDA, gcc and
the bundled trainer - each held to the image's label and the matrix cell (`_same`)."""

from __future__ import annotations

from typing import Any

import pytest

from builder.judgement.registry import check
from builder.spec.labels import (
    CUDA_LABEL,
    GCC_LABEL,
    PYTHON_LABEL,
    TORCH_LABEL,
    TRAINER_VERSION_LABEL,
)
from builder.verify.suite.common import Detail, fail, is_cuda, labels


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
