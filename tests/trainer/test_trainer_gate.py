"""`trainer gate`: the band rule on made-up traces, then the gate end to end on the tiny model
(BF16 against BF16 with a new seed passes; a wrong scale on one layer fails), and its bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.trainer import emulated_fp8
from tests.trainer.test_trainer_png import decode
from tests.trainer.trainer_helpers import RunCli
from trainer import fault, gate
from trainer.errors import EXIT_BAD_INPUT, EXIT_GATE_FAILED
from trainer.fp8 import torchao_backend

# 40 steps: the fault at step 10 leaves 30 steps to show in; every step is in the curve
GATE = ("gate", "--model", "tiny", "--steps", "40", "--eval-interval", "0", "--log-interval", "10")
REFS = [{1: 5.0, 2: 4.0, 3: 3.0}, {1: 5.0, 2: 4.2, 3: 3.1}, {1: 5.0, 2: 3.8, 3: 2.9}]


def test_the_band_is_mean_plus_minus_k_sd_with_a_floor_where_the_seeds_agree() -> None:
    check = gate.band_check("loss", REFS, {1: 5.04, 2: 4.5, 3: 3.0}, gate.Rule(k=3.0))
    # step 1: every seed 5.0, sd 0: the 1 % floor (+-0.05) and not a zero-width band
    assert check["lo"][0] == pytest.approx(4.95) and check["hi"][0] == pytest.approx(5.05)
    # step 2: sd 0.2, so +-0.6 around 4.0; 4.5 is inside
    assert check["std"][1] == pytest.approx(0.2) and check["hi"][1] == pytest.approx(4.6)
    assert check["outside_steps"] == [] and check["pass"] is True
    wide = gate.band_check("loss", REFS, {1: 5.2, 2: 4.0, 3: 3.0}, gate.Rule(k=3.0))
    assert wide["outside_steps"] == [1] and wide["outside_frac"] == pytest.approx(1 / 3)
    assert wide["pass"] is False  # 1 of 3 steps is more than 20 %
    assert gate.band_check("loss", REFS, {1: 5.2, 2: 4, 3: 3}, gate.Rule(max_outside=0.5))["pass"]


def test_the_verdict_names_each_failed_check_and_a_stopped_candidate() -> None:
    norms = [{1: 1.0, 2: 1.0, 3: 1.0}] * 3
    ok = gate.verdict(REFS, norms, REFS[0], norms[0], None, gate.Rule())
    assert ok["verdict"] == "pass" and ok["why"] == []
    assert ok["final_loss"]["window_steps"] == [3] and ok["final_loss"]["pass"] is True
    bad = gate.verdict(
        REFS, norms, {1: 5.0, 2: 9.0, 3: float("nan")}, {1: 9.0}, "step 3: nan", gate.Rule()
    )
    assert bad["verdict"] == "fail" and bad["loss"]["outside_steps"] == [2, 3]
    assert bad["why"][0] == "the candidate stopped: step 3: nan"
    assert any(w.startswith("loss: 2 of 3 steps") for w in bad["why"])
    assert any(w.startswith("grad norm: 1 of 1 steps") for w in bad["why"])
    with pytest.raises(ValueError, match=">= 3 reference runs"):
        gate.verdict(REFS[:2], norms[:2], REFS[0], norms[0], None, gate.Rule())
    with pytest.raises(ValueError, match="max_outside"):
        gate.Rule(max_outside=1.0)


def test_weight_scale_is_a_fault_kind_for_the_candidate() -> None:
    assert fault.parse("fp8:weight-scale@3", 10) == fault.Fault("weight-scale", 3, "fp8")
    assert fault.scaled_layer(4) == "blocks.2.attn.qkv"


def _doc(out: Path) -> dict[str, object]:
    assert sorted(p.name for p in out.iterdir()) == ["gate.json", "gate.png"]  # no temporaries
    doc: dict[str, object] = json.loads((out / "gate.json").read_text())
    width, height, _ = decode((out / "gate.png").read_bytes())
    assert width == 720 and height > 600  # two panels
    return doc


@pytest.mark.integration
def test_bf16_against_bf16_with_a_new_seed_passes(run_cli: RunCli, tmp_path: Path) -> None:
    out = tmp_path / "gate"
    res = run_cli(
        *GATE,
        "--reference",
        "bf16",
        "--candidate",
        "bf16",
        "--candidate-seed",
        "99",
        "--out",
        str(out),
    )
    assert res.code == 0, res.err
    assert "gate bf16 vs bf16 (3 seeds): PASS" in res.out
    doc = _doc(out)
    assert doc["kind"] == "trainimg.trainer.gate" and doc["schema"] == 1
    assert doc["verdict"] == "pass" and doc["why"] == []
    assert doc["reference_seeds"] == [1234, 1235, 1236] and doc["candidate_seed"] == 99
    tokens = doc["tokens"]
    assert isinstance(tokens, dict) and len({*tokens["reference"], tokens["candidate"]}) == 1
    loss = doc["loss"]
    assert isinstance(loss, dict) and loss["steps"] == list(range(1, 41))
    assert all(lo < m < hi for lo, m, hi in zip(loss["lo"], loss["mean"], loss["hi"], strict=True))
    assert doc["rule"] == {
        "k": 3.0,
        "floor_rel": {"loss": 0.01, "grad_norm": 0.1},
        "max_outside": 0.2,
        "final_fraction": 0.1,
        "min_seeds": 3,
    }


@pytest.mark.usefixtures("torchao")
def test_a_wrong_scale_on_one_fp8_layer_fails_the_gate(
    run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The candidate is FP8 with torchao's GEMMs emulated (tests/trainer/emulated_fp8.py); the
    same clean run passed with 0 of 40 steps outside (docs/trainer.md, Quality gate)."""
    monkeypatch.setattr(torchao_backend, "convert_float8", emulated_fp8.emulated)
    res = run_cli(
        *GATE,
        "--reference",
        "bf16",
        "--candidate",
        "fp8",
        "--inject-fault",
        "fp8:weight-scale@10",
        "--out",
        str(tmp_path),
    )
    assert res.code == EXIT_GATE_FAILED, res.err
    assert "FAIL" in res.out and "fail: loss:" in res.out
    doc = _doc(tmp_path)
    assert doc["verdict"] == "fail" and doc["inject_fault"] == "weight-scale@10"
    assert doc["fp8_layers"] == {"reference": 0, "candidate": 8}
    loss = doc["loss"]
    assert isinstance(loss, dict) and loss["outside_frac"] > 0.2
    # the first reference run's seed (init, batches): close to it until the fault, then out
    assert loss["candidate"][:10] == pytest.approx(loss["reference"][0][:10], rel=0.01)
    assert loss["candidate"][:10] != pytest.approx(loss["reference"][1][:10], rel=0.01)
    assert 11 in loss["outside_steps"] and min(loss["outside_steps"]) > 10


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--seeds", "2"), "--seeds 2: the band needs at least 3 reference runs"),
        (("--k", "0"), "--k/--max-outside: k must be a positive number, got 0.0"),
        (("--inject-fault", "fp8:weight-scale@3"), "names preset fp8; under gate it hits"),
        (("--stop-at", "5"), "train.stop_at 5: the gate compares whole runs"),
    ],
)
def test_bad_input_exits_2_naming_the_value(
    run_cli: RunCli, tmp_path: Path, argv: tuple[str, ...], message: str
) -> None:
    res = run_cli(
        *GATE, "--reference", "bf16", "--candidate", "fp8-fwd", "--out", str(tmp_path / "o"), *argv
    )
    assert res.code == EXIT_BAD_INPUT and message in res.err and "Traceback" not in res.err
    assert not (tmp_path / "o").exists()  # refused before anything was written


def test_an_unknown_preset_exits_2_naming_it(run_cli: RunCli, tmp_path: Path) -> None:
    res = run_cli(*GATE, "--reference", "bf16", "--candidate", "fp9", "--out", str(tmp_path))
    assert res.code == EXIT_BAD_INPUT and "'fp9'" in res.err and "bf16" in res.err


def test_an_unwritable_out_exits_2_before_training(run_cli: RunCli, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    res = run_cli(*GATE, "--reference", "bf16", "--candidate", "bf16", "--out", str(blocker / "o"))
    assert res.code == EXIT_BAD_INPUT and f"--out {blocker / 'o'}: not a writable" in res.err
    assert "== gate: reference" not in res.out  # nothing trained
