"""Issue 13's guards: bad numbers, lost updates, NaN state, memory, resume mismatches, disk full."""

from __future__ import annotations

import hashlib
import json
import resource
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tests.trainer.trainer_helpers import QUICK, RunCli, records, run_python
from trainer import checkpoint
from trainer.errors import EXIT_BAD_INPUT, EXIT_NUMERICAL

# Each is exit 2 with one `error:` line before training (in-process: a traceback would raise).
BAD_NUMBERS: list[tuple[list[str], str]] = [
    (["--lr", "nan"], "train.lr: must be a finite number"),
    (["--lr", "inf"], "train.lr: must be a finite number"),
    (["--lr", "-1"], "train.lr: must lie in (0, 1]"),
    (["--lr", "3"], "train.lr: must lie in (0, 1]"),
    (["--set", "train.grad_clip=.nan"], "train.grad_clip: must be a finite number"),
    (["--set", "train.grad_clip=-1"], "train.grad_clip: must not be negative"),
    (["--set", "train.weight_decay=.inf"], "train.weight_decay: must be a finite"),
    (["--set", "train.weight_decay=1.5"], "train.weight_decay: must lie in [0, 1)"),
    (["--set", "train.eps=0"], "train.eps: must lie in (0, 1)"),
    (["--set", "train.eps=.nan"], "train.eps: must be a finite"),
    (["--set", "train.beta1=1.0"], "train.beta1: must lie in [0, 1)"),
    (["--set", "train.beta2=.nan"], "train.beta2: must be a finite"),
    (["--set", "model.rope_theta=.nan"], "model.rope_theta: must be a finite"),
    (["--set", "model.rope_theta=0.5"], "model.rope_theta: must exceed 1"),
    (["--preset", "fp16", "--set", "precision.loss_scale_init=.nan"], "loss_scale_init: must"),
    (["--set", "precision.loss_scale_floor=0"], "the floor positive"),
    (["--set", "health.spike_factor=.inf"], "health.spike_factor: must be a finite"),
    (["--set", "health.spike_factor=0.5"], "health.spike_factor: must exceed 1"),
    (["--set", "train.min_lr_ratio=-3"], "train.min_lr_ratio: must lie in [0, 1]"),
    (["--set", "train.min_lr_ratio=.nan"], "train.min_lr_ratio: must be a finite"),
    (["--set", "train.warmup_steps=-1"], "train.warmup_steps: must lie in 0..train.steps"),
    (["--set", "train.warmup_steps=99"], "train.warmup_steps: must lie in 0..train.steps"),
    (["--seed", "-1"], "train.seed: must lie in 0.."),
    (["--seed", "99999999999999999999"], "train.seed: must lie in 0.."),
    (["--batch-size", "100000000"], "GiB per process"),
    (["--ckpt-dir", ""], "checkpoint.dir: an empty path"),
    (["--metrics-file", ""], "metrics.file: an empty path"),
    (["--master-weights", "fp32", "--stochastic-rounding"], "nothing to round"),
    (["--set", "model.dim=0"], "model.dim: must be at least 1, got 0"),  # not "the default"
    (["--set", "model.n_heads=0"], "model.n_heads: must be at least 1, got 0"),
    (["--set", "model.vocab_size=1000000000000"], "model.vocab_size: at most 2**32"),
    (["--set", "model.vocab_size=4294967296"], "GiB per process"),  # the memory check, not numpy
]


@pytest.mark.parametrize(("args", "needle"), BAD_NUMBERS, ids=[" ".join(a) for a, _ in BAD_NUMBERS])
def test_bad_numbers_are_exit_2_with_one_line(
    run_cli: RunCli, args: list[str], needle: str
) -> None:
    res = run_cli("train", *QUICK, "--steps", "4", *args)
    assert res.code == EXIT_BAD_INPUT, res.err
    assert res.err.startswith("error: ") and res.err.count("\n") == 1 and needle in res.err
    assert res.out == ""


# integration: it trains (its first optimizer step imports torch._dynamo: ~5 CPU-s)
@pytest.mark.integration
def test_unreadable_config_and_metrics_file(run_cli: RunCli, tmp_path: Path) -> None:
    latin1 = tmp_path / "run.yaml"
    latin1.write_bytes("train:\n  steps: 4 # über\n".encode("latin-1"))
    res = run_cli("train", *QUICK, "--config", str(latin1))
    assert res.code == EXIT_BAD_INPUT and "not UTF-8 text" in res.err and str(latin1) in res.err
    res = run_cli(
        "train", *QUICK, "--preset", "bf16", "--steps", "2", "--metrics-file", "/dev/full"
    )
    assert res.code == EXIT_BAD_INPUT
    assert res.err.strip().splitlines()[-1].startswith("error: metrics file /dev/full: cannot")


def test_the_1b_model_at_batch_64_is_refused_on_the_cpu(run_cli: RunCli) -> None:
    res = run_cli(
        "train", "--model", "1b", "--batch-size", "64", "--device", "cpu", "--preset", "bf16"
    )
    assert res.code == EXIT_BAD_INPUT and res.err.count("\n") == 1
    assert "needs about" in res.err and "activations" in res.err
    assert "--activation-checkpointing full" in res.err and "--batch-size" in res.err


# integration: it trains (its first optimizer step imports torch._dynamo: ~5 CPU-s)
@pytest.mark.integration
def test_out_of_memory_in_a_step_names_the_step_and_the_estimate(
    run_cli: RunCli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A CUDA OOM cannot happen on this machine: the model's forward raises torch's OOM error
    (what the CUDA allocator raises) at step 2."""
    from trainer.model import Transformer

    real = Transformer.forward
    calls = {"n": 0}

    def forward(self: Transformer, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        calls["n"] += 1
        if calls["n"] == 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(self, idx, targets)

    monkeypatch.setattr(Transformer, "forward", forward)
    metrics = tmp_path / "m.jsonl"
    res = run_cli(
        "train", *QUICK, "--preset", "bf16", "--steps", "4", "--metrics-file", str(metrics)
    )
    assert res.code == EXIT_BAD_INPUT
    last = res.err.strip().splitlines()[-1]
    assert last.startswith("error: step 2: out of memory") and "estimated" in last
    (summary,) = records(metrics, "summary")  # the run's end is recorded, whatever ended it
    assert summary["status"] == "error" and "out of memory" in summary["message"]


@pytest.mark.parametrize(("master", "warns"), [("bf16", True), ("fp32", False)])
@pytest.mark.integration
def test_lost_updates_warn_for_bf16_masters_at_a_low_lr(
    run_cli: RunCli, tmp_path: Path, master: str, warns: bool
) -> None:
    metrics = tmp_path / "m.jsonl"
    res = run_cli(
        "train",
        *QUICK,
        "--preset",
        "bf16",
        "--master-weights",
        master,
        "--lr",
        "3e-5",
        "--steps",
        "3",
        "--metrics-file",
        str(metrics),
    )
    assert res.code == 0, res.err
    fracs = [r["unchanged_frac"] for r in records(metrics)]
    assert ("weights unchanged" in res.err) is warns
    if warns:
        assert min(fracs) > 0.3
    else:
        assert max(fracs) < 0.001


def test_stochastic_rounding_moves_bf16_weights_by_tiny_updates() -> None:
    from trainer.optim import stochastic_round_bf16

    torch.manual_seed(0)
    w = torch.full((100_000,), 1.0)
    moved = stochastic_round_bf16(w + 1e-4)  # 1/78 of a bf16 ulp at 1.0
    assert moved.dtype == torch.bfloat16 and set(torch.unique(moved.float()).tolist()) == {
        1.0,
        1.0078125,
    }
    assert moved.float().mean().item() == pytest.approx(1.0001, abs=2e-5)  # unbiased
    assert (stochastic_round_bf16(-w - 1e-4).float().mean().item()) == pytest.approx(
        -1.0001, abs=2e-5
    )
    assert (w + 1e-4).to(torch.bfloat16).float().mean().item() == 1.0  # round-to-nearest: lost


@pytest.mark.integration
def test_a_checkpoint_with_nan_weights_is_never_written(run_cli: RunCli, tmp_path: Path) -> None:
    ckpt = tmp_path / "ck"
    res = run_cli(
        "train",
        *QUICK,
        "--preset",
        "bf16",
        "--steps",
        "4",
        "--checkpoint-interval",
        "1",
        "--ckpt-dir",
        str(ckpt),
        "--inject-fault",
        "weight-nan@2",
    )
    assert res.code == EXIT_NUMERICAL and "no checkpoint was written" in res.err
    assert [s for s, _ in checkpoint.list_steps(ckpt)] == [1]
    state = checkpoint.load(ckpt / "step_00000001").state
    assert all(torch.isfinite(t).all() for t in state["model"].values())


def _rehash(path: Path) -> None:
    meta = json.loads((path / "meta.json").read_text())
    meta["state_sha256"] = hashlib.sha256((path / "state.pt").read_bytes()).hexdigest()
    (path / "meta.json").write_text(json.dumps(meta))


def _edit_state(path: Path, edit: Callable[[dict[str, object]], None]) -> None:
    state = torch.load(path / "state.pt", weights_only=True)
    edit(state)
    torch.save(state, path / "state.pt")
    _rehash(path)


def _edit_meta(path: Path, key: str, value: object) -> None:
    meta = json.loads((path / "meta.json").read_text())
    if value is None:
        del meta[key]
    else:
        meta[key] = value
    (path / "meta.json").write_text(json.dumps(meta))


def _rename_model_keys(state: dict[str, object]) -> None:
    model = state["model"]
    assert isinstance(model, dict)
    state["model"] = {"x" + k: v for k, v in model.items()}


def _garble_python_rng(state: dict[str, object]) -> None:
    rng = state["rng"]
    assert isinstance(rng, dict)
    rng["python"] = [3, [1, 2], None]


def _drop_param_groups(state: dict[str, object]) -> None:
    optim = state["optimizer"]
    assert isinstance(optim, dict)
    del optim["param_groups"]


def _drop_a_model_tensor(state: dict[str, object]) -> None:
    model = state["model"]
    assert isinstance(model, dict)
    del model["blocks.1.mlp.down.weight"]  # set_model_state_dict alone would keep the fresh init


def _truncate_torch_rng(state: dict[str, object]) -> None:
    rng = state["rng"]
    assert isinstance(rng, dict)
    rng["torch"] = rng["torch"][:100]


def _reshape_a_moment(state: dict[str, object]) -> None:
    optim = state["optimizer"]
    assert isinstance(optim, dict)
    moments = next(iter(optim["state"].values()))
    moments["exp_avg"] = moments["exp_avg"].reshape(-1)[:7]


MALFORMED: list[tuple[str, Callable[[Path], None], str]] = [
    ("meta step a string", lambda p: _edit_meta(p, "step", "two"), "'step' should be"),
    ("meta without arch", lambda p: _edit_meta(p, "arch", None), "'arch' is missing"),
    ("wrong model keys", lambda p: _edit_state(p, _rename_model_keys), "does not fit this model"),
    (
        "a model tensor missing",
        lambda p: _edit_state(p, _drop_a_model_tensor),
        "lacks model tensor(s) blocks.1.mlp.down.weight",
    ),
    ("bad python rng", lambda p: _edit_state(p, _garble_python_rng), "Python random state"),
    ("torch rng truncated", lambda p: _edit_state(p, _truncate_torch_rng), "RNG state does not"),
    ("a moment reshaped", lambda p: _edit_state(p, _reshape_a_moment), "optimizer exp_avg of"),
    ("optimizer lacks groups", lambda p: _edit_state(p, _drop_param_groups), "param_groups"),
]


@pytest.mark.parametrize(
    ("damage", "needle"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED]
)
@pytest.mark.integration
def test_malformed_but_hash_valid_checkpoints_are_exit_2(
    run_cli: RunCli, tmp_path: Path, damage: Callable[[Path], None], needle: str
) -> None:
    ckpt = tmp_path / "ck"
    common = ("train", *QUICK, "--preset", "bf16", "--steps", "4", "--ckpt-dir", str(ckpt))
    assert run_cli(*common, "--stop-at", "2").code == 0
    damage(ckpt / "step_00000002")
    res = run_cli(*common, "--resume", str(ckpt / "step_00000002"))
    assert res.code == EXIT_BAD_INPUT and res.err.count("\n") == 1 and needle in res.err


@pytest.mark.integration
def test_resume_guards_and_the_fallback_to_an_older_checkpoint(
    run_cli: RunCli, tmp_path: Path
) -> None:
    ckpt = tmp_path / "ck"
    common = ("train", *QUICK, "--preset", "bf16", "--steps", "6", "--ckpt-dir", str(ckpt))
    assert run_cli(*common, "--stop-at", "4", "--checkpoint-interval", "2").code == 0
    res = run_cli(*common, "--resume", "--seed", "7")
    assert res.code == EXIT_BAD_INPUT and "train.seed 1234 -> 7" in res.err
    res = run_cli(*common, "--resume", "--batch-size", "4")
    assert res.code == EXIT_BAD_INPUT and "train.batch_size 8 -> 4" in res.err
    res = run_cli(*common, "--resume", "--data", "synthetic", "--set", "model.vocab_size=512")
    assert res.code == EXIT_BAD_INPUT  # another model: refused even with --resume-anyway
    _edit_meta(ckpt / "step_00000004", "world_size", 2)
    res = run_cli(*common, "--resume")
    assert res.code == EXIT_BAD_INPUT and "world_size 2 -> 1" in res.err
    _edit_meta(ckpt / "step_00000004", "world_size", 1)
    # the newest checkpoint rots: the run continues from the one before, and says so
    data = bytearray((ckpt / "step_00000004" / "state.pt").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (ckpt / "step_00000004" / "state.pt").write_bytes(bytes(data))
    res = run_cli(*common, "--resume", "--seed", "7", "--resume-anyway")
    assert res.code == 0, res.err
    assert "skipping checkpoint" in res.err and "step_00000004" in res.err
    assert "resumed from" in res.out and "step_00000002" in res.out
    assert "--resume-anyway: continuing" in res.err and "train.seed 1234 -> 7" in res.err


@pytest.mark.integration
def test_a_changed_schedule_is_refused_and_other_changes_are_named(
    run_cli: RunCli, tmp_path: Path
) -> None:
    ckpt = tmp_path / "ck"
    common = ("train", *QUICK, "--preset", "bf16", "--ckpt-dir", str(ckpt))
    assert run_cli(*common, "--steps", "6", "--stop-at", "3").code == 0
    res = run_cli(*common, "--steps", "12", "--resume")  # the cosine stretched: an LR jump
    assert res.code == EXIT_BAD_INPUT and "train.steps 6 -> 12" in res.err
    res = run_cli(*common, "--steps", "6", "--lr", "1e-2", "--resume")
    assert res.code == EXIT_BAD_INPUT and "train.lr 0.003 -> 0.01" in res.err
    res = run_cli(
        *common, "--steps", "6", "--resume", "--set", "train.weight_decay=0.0",
        "--set", "train.beta2=0.99", "--sensitive-layers", "embedding,head",
    )  # fmt: skip
    assert res.code == 0, res.err
    named = res.err.split("changed settings: ", 1)[1]
    assert "train.weight_decay 0.1 -> 0.0" in named and "train.beta2 0.95 -> 0.99" in named
    assert "precision.sensitive_layers" in named


@pytest.mark.integration
def test_the_data_fingerprint_is_the_content_not_the_path(run_cli: RunCli, tmp_path: Path) -> None:
    tokens = bytes(range(256)) * 40  # a text file of 10240 bytes
    first, moved = tmp_path / "a.txt", tmp_path / "elsewhere" / "a.txt"
    first.write_bytes(tokens)
    moved.parent.mkdir()
    moved.write_bytes(tokens)
    ckpt = tmp_path / "ck"
    common = ("train", *QUICK, "--preset", "bf16", "--steps", "4", "--ckpt-dir", str(ckpt))
    assert run_cli(*common, "--data", str(first), "--stop-at", "2").code == 0
    res = run_cli(*common, "--data", str(moved), "--resume", "--stop-at", "3")
    assert res.code == 0, res.err  # the same bytes at another mount
    first.write_bytes(tokens[::-1])  # regenerated: the same size, other tokens
    res = run_cli(*common, "--data", str(first), "--resume")
    assert res.code == EXIT_BAD_INPUT and "ends_sha256" in res.err


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))


@pytest.mark.integration
def test_a_full_disk_during_a_checkpoint_is_exit_2_and_leaves_the_older_ones(
    tmp_path: Path,
) -> None:
    """RLIMIT_FSIZE stands in for a full disk: state.pt (~2.8 MB) cannot be written, the
    1 MiB-limited process gets the same OSError path as ENOSPC."""
    ckpt = tmp_path / "ck"
    proc = run_python(
        "-m", "trainer", "train", *QUICK, "--steps", "2", "--ckpt-dir", str(ckpt),
        preexec_fn=_limit_file_size,
    )  # fmt: skip
    assert proc.returncode == EXIT_BAD_INPUT, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: checkpoint dir") and "File too large" in last
    assert list(ckpt.iterdir()) == []  # no temporary left behind


def test_the_lost_update_warning_fits_the_master_weights() -> None:
    from trainer.config import PrecisionConfig
    from trainer.health import lost_updates

    fp32 = lost_updates(0.5, PrecisionConfig())
    assert fp32 is not None and "fp32 master weights" in fp32 and "use master_weights" not in fp32
    bf16 = lost_updates(0.5, PrecisionConfig(master_weights="bf16"))
    assert bf16 is not None and "use master_weights fp32" in bf16


def test_a_step_the_grad_scaler_skips_reports_no_unchanged_count() -> None:
    """unchanged_frac was the previous step's on a skipped fp16 step."""
    from types import SimpleNamespace

    from trainer import train_step
    from trainer.config import RunConfig
    from trainer.optim import AdamW

    weight = torch.nn.Parameter(torch.ones(4))
    optimizer = AdamW(
        [weight], lr=0.1, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0, state_dtype=torch.float32
    )
    run = SimpleNamespace(
        optimizer=optimizer, scaler=None, cfg=RunConfig(), fault=None, fp8_converter=None
    )
    weight.grad = torch.ones(4)
    assert train_step.optimizer_step(run, [weight], 1, measure=True) is None  # type: ignore[arg-type]
    assert optimizer.unchanged is not None  # measured
    run.scaler = torch.amp.GradScaler("cpu")
    run.scaler.scale(torch.ones(()))  # a scaled loss, as train_step.backward makes one
    weight.grad = torch.full((4,), float("inf"))
    scale = train_step.optimizer_step(run, [weight], 2, measure=True)  # type: ignore[arg-type]
    assert scale is not None and scale.item() == 65536.0 / 2  # skipped: the scale halves
    assert optimizer.unchanged is None


@pytest.mark.integration
def test_a_slow_save_warns_that_a_sigterm_save_must_fit_the_stop_timeout(
    run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainer import loop

    monkeypatch.setattr(loop, "SLOW_SAVE_S", 0.0)  # every save is "slow"
    res = run_cli(
        "train", *QUICK, "--preset", "bf16", "--steps", "2", "--checkpoint-interval", "1",
        "--ckpt-dir", str(tmp_path),
    )  # fmt: skip
    assert res.code == 0, res.err
    assert res.err.count("must fit the stop timeout") == 1 and "GB/s" in res.err
