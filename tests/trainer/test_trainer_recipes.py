"""Issue 13's FP8 and report additions: MXFP8 (emulated on the CPU), torchao's size filter,
the compile default, the matplotlib A/B figure, --profile, TensorBoard and the console script."""

from __future__ import annotations

import importlib.util
import json
import sys
import tomllib
from pathlib import Path

import pytest
import torch
from torch import nn

from tests.trainer.trainer_helpers import QUICK, REPO, RunCli, losses, records
from trainer import cli
from trainer.config import ModelConfig, PrecisionConfig
from trainer.errors import EXIT_BAD_INPUT
from trainer.fp8 import converters, rules, torchao_backend
from trainer.fp8.layers import plan_layers
from trainer.model import Transformer, resolve_arch
from trainer.precision import resolve

MX = (
    "--preset",
    "mxfp8",
)  # one flag: fp8 layering, E4M3 gradients, the mxfp8 recipe
MX_SHAPE = ("--set", "model.ffn_dim=192")  # the tiny model's 176 is not a multiple of 32


@pytest.mark.integration
def test_mxfp8_trains_on_the_cpu_emulated_with_falling_loss(
    run_cli: RunCli, tmp_path: Path
) -> None:
    metrics = tmp_path / "m.jsonl"
    res = run_cli("train", *QUICK, *MX, *MX_SHAPE, "--steps", "4", "--metrics-file", str(metrics))
    assert res.code == 0, res.err
    assert "via torchao (mxfp8)" in res.out and "8/17 linear layers" in res.out
    curve = losses(metrics)
    assert curve[4] < curve[1] - 0.3, curve
    (summary,) = records(metrics, "summary")
    assert summary["fp8_layers"] == 8


def test_mxfp8_rules() -> None:
    assert "MX block 32" in rules.linear_problems(64, 176, "mxfp8")[0]
    assert rules.linear_problems(64, 192, "mxfp8") == []
    assert rules.token_problems(48, "mxfp8") and not rules.token_problems(48)
    hopper = rules.device_problem("NVIDIA H200", (9, 0), "mxfp8")
    assert hopper is not None and "sm_100" in hopper and "sm_90" in hopper
    assert rules.device_problem("NVIDIA B200", (10, 0), "mxfp8") is None
    assert rules.device_problem("NVIDIA B300", (10, 3), "mxfp8") is None
    for cc in ((11, 0), (12, 0), (12, 1)):  # block-scaled GEMMs, but not torchao's MX kernels
        refused = rules.device_problem("gpu", cc, "mxfp8")
        assert refused is not None and "sm_100 and sm_103" in refused
    p = dataclass_replace(fp8_recipe="mxfp8", backward_matmul="fp8_e5m2")
    with pytest.raises(Exception, match="set backward_matmul fp8_e4m3"):
        resolve(p)


def dataclass_replace(**kw: object) -> PrecisionConfig:
    import dataclasses

    return dataclasses.replace(PrecisionConfig(), **kw)  # type: ignore[arg-type]


def test_torchaos_size_filter_keeps_small_layers_in_bf16(torchao: None) -> None:
    plan = resolve(PrecisionConfig())
    converter = converters.for_plan(plan, "none")
    assert converter is not None
    keep = converter.size_filter()
    assert keep is not None
    assert not keep(nn.Linear(1024, 1024), "blocks.1.attn.proj")  # K <= 4096 and N <= 1024
    assert keep(nn.Linear(1024, 3072), "blocks.1.attn.qkv")
    model = Transformer(resolve_arch(ModelConfig(size="tiny"), 256))
    unfiltered = plan_layers(model, [], 4)
    filtered = plan_layers(model, [], 4, keep)
    assert all(c.fp8 for c in unfiltered if c.name != "head")
    assert not any(c.fp8 for c in filtered) and "size filter" in filtered[0].reason


@pytest.mark.integration
def test_the_size_filter_is_cuda_only_by_default_and_can_be_forced(run_cli: RunCli) -> None:
    res = run_cli("train", *QUICK, "--steps", "1", "--set", "precision.fp8_size_filter=always")
    assert res.code == 0 and "0/17 linear layers" in res.out and "small (size filter)" in res.out
    assert "size filter kept all 8 candidate layers in BF16" in res.err
    res = run_cli("train", *QUICK, "--steps", "1")
    assert res.code == 0 and "8/17 linear layers" in res.out
    assert "FP8 runs EAGER on this CPU" in res.err  # the compile default is CUDA-only


@pytest.mark.integration
def test_the_ab_figure_and_json_say_cpu(run_cli: RunCli, tmp_path: Path) -> None:
    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("matplotlib is not installed (the trainer extra brings it)")
    res = run_cli(
        "train", *QUICK, "--compare", "bf16,fp8-fwd", "--steps", "4", "--ckpt-dir", str(tmp_path)
    )
    assert res.code == 0, res.err
    summary = json.loads((tmp_path / "compare_bf16_vs_fp8-fwd.json").read_text())
    assert summary["measured_on"] == "cpu" and "meaningless for FP8" in summary["throughput_note"]
    png = (tmp_path / "compare_bf16_vs_fp8-fwd.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == (800, 650)  # matplotlib's 8 x 6.5 in at 100 dpi
    assert "meaningless for FP8" in res.out


@pytest.mark.integration
def test_profile_writes_a_trace_and_the_summary_has_wall_clock_throughput(
    run_cli: RunCli, tmp_path: Path
) -> None:
    metrics = tmp_path / "m.jsonl"
    res = run_cli(
        "train",
        *QUICK,
        "--preset",
        "bf16",
        "--steps",
        "4",
        "--profile",
        "1",
        "--ckpt-dir",
        str(tmp_path),
        "--metrics-file",
        str(metrics),
    )
    assert res.code == 0, res.err
    trace = json.loads((tmp_path / "profile_rank0.json").read_text())
    names = {e.get("name", "") for e in trace["traceEvents"]}
    assert any("aten::mm" in n or "aten::addmm" in n for n in names)
    (summary,) = records(metrics, "summary")
    assert 0 < summary["tokens_per_s_wall"] < summary["tokens_per_s"] * 1.5


def test_tensorboard_events_or_a_clear_error(run_cli: RunCli, tmp_path: Path) -> None:
    board = tmp_path / "tb"
    res = run_cli(
        "train", *QUICK, "--preset", "bf16", "--steps", "2", "--tensorboard-dir", str(board)
    )
    if importlib.util.find_spec("tensorboard") is None:
        assert res.code == EXIT_BAD_INPUT and "needs the tensorboard package" in res.err
    else:
        assert res.code == 0 and any(p.name.startswith("events.out") for p in board.iterdir())


def test_the_train_console_script(monkeypatch: pytest.MonkeyPatch, capsys: object) -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["train"] == "trainer.cli:train_entry"
    monkeypatch.setattr(sys, "argv", ["train", *QUICK, "--preset", "bf16", "--lr", "nan"])
    assert cli.train_entry() == EXIT_BAD_INPUT


def test_fp32_masters_give_the_fp8_layers_bf16_copies_only_inside_the_step() -> None:
    layer = nn.Linear(32, 32, bias=False)
    with torchao_backend.compute_weights([layer], torch.bfloat16):
        assert layer.weight.dtype == torch.bfloat16
        out = layer(torch.ones(2, 32, dtype=torch.bfloat16)).sum()
    assert isinstance(layer.weight, nn.Parameter) and layer.weight.dtype == torch.float32
    out.backward()
    assert layer.weight.grad is not None and layer.weight.grad.dtype == torch.float32


def _torchao_files(monkeypatch: pytest.MonkeyPatch, version: str, files: list[str]) -> None:
    from importlib import metadata

    monkeypatch.setattr(metadata, "files", lambda name: [Path(f) for f in files])
    monkeypatch.setattr(metadata, "version", lambda name: version)


def test_mxfp8_names_the_torchao_it_needs_and_the_cuda_runtime_its_kernels_link(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The extension's `cpython-310` tag is no Python ABI (it has no PyInit); what decides is the
    libcudart it links, read from the real installed file's ELF DT_NEEDED."""
    from trainer.fp8 import mxfp8

    files = mxfp8.kernel_files()
    if not files:
        pytest.skip("this torchao has no _C_mxfp8 extension to read")
    assert all(b"PyInit_" not in f.read_bytes() for f in files)
    runtimes = mxfp8.kernel_cudart()
    assert runtimes and all(rt.startswith("libcudart.so.") for rt in runtimes)
    major = runtimes[0].rsplit(".", 1)[1]
    assert mxfp8.kernel_problem(f"{major}.0") is None
    other = "12.8" if major != "12" else "13.0"
    hint = mxfp8.kernel_problem(other)
    assert hint is not None and runtimes[0] in hint and f"CUDA {other}" in hint
    assert "CPython" not in hint and "Python 3" not in hint
    _torchao_files(monkeypatch, "0.16.0", ["torchao/__init__.py"])
    problem = mxfp8.module_problem()
    assert problem is not None and "torchao >= 0.17" in problem and "torchao 0.16.0" in problem
