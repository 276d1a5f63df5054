"""--compare: one compile decision, interleaved sides, and the JSON and figure written even when
a side stops; the built-in figure (images ship no matplotlib) shows both curves and the stop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.trainer.test_trainer_png import decode
from tests.trainer.trainer_helpers import QUICK, RunCli, records
from trainer import compare, compare_run, config, figure, machine
from trainer.distributed import Dist
from trainer.errors import EXIT_NUMERICAL, EXIT_STOPPED_UNSAVED, BadInput
from trainer.plot import PALETTE, RED

CURVE = {1: 5.5, 2: 5.0, 3: 4.6, 4: 4.3, 5: 4.1, 6: 4.0}


def _dist(device: str) -> Dist:
    return Dist(rank=0, world=1, local_rank=0, device=torch.device(device), mode="none")


def test_one_compile_decision_for_both_sides() -> None:
    cfg = config.build()
    names = ["bf16", "fp8-fwd"]
    # unset: FP8 on CUDA would compile alone (with a C compiler), so both sides compile
    on_cuda = compare_run._compile_both(cfg, names, _dist("cuda"))
    assert on_cuda is machine.has_compiler()
    assert compare_run._compile_both(cfg, names, _dist("cpu")) is False
    forced = config.build(overrides={"train": {"compile": False}})
    assert compare_run._compile_both(forced, names, _dist("cuda")) is False
    sides = [compare_run._side_config(cfg, name, True) for name in names]
    assert [s.train.compile for s in sides] == [True, True]
    assert [s.preset for s in sides] == names and all(s.checkpoint.dir is None for s in sides)


def test_a_preset_prefixed_fault_hits_one_side_only() -> None:
    cfg = config.build(overrides={"train": {"inject_fault": "fp8-fwd:nan@3", "steps": 6}})
    a, b = (compare_run._side_config(cfg, name, False) for name in ("bf16", "fp8-fwd"))
    assert a.train.inject_fault is None and b.train.inject_fault == "nan@3"


def _sides(stopped: bool = True) -> tuple[compare.Side, compare.Side]:
    a = compare.Side("bf16", dict(CURVE), 1000.0, 1.0, None, "completed")
    b_losses = {s: v for s, v in CURVE.items() if s < 4} if stopped else dict(CURVE)
    b = compare.Side(
        "fp8", b_losses, 1250.0, 1.0, None, "numerical_stop" if stopped else "completed",
        4 if stopped else None, "step 4: loss is nan and grad norm is nan; stopped before",
    )  # fmt: skip
    return a, b


# integration: it trains both sides (and draws the figure: matplotlib)
@pytest.mark.integration
def test_a_stopped_side_is_named_with_its_step_and_reason(tmp_path: Path) -> None:
    a, b = _sides()
    summary = compare.summarize(a, b, "cuda", 2, True)
    assert summary["stopped"] == [
        {"side": "fp8", "step": 4, "status": "numerical_stop", "reason": b.reason}
    ]
    assert summary["steps"] == 3 and summary["throughput_ratio"] == 1.25
    assert summary["compiled"] is True and summary["interleaved_every"] == 2
    json_path, png_path = compare.write(summary, a, b, tmp_path)
    written = json.loads(json_path.read_text())
    assert written["stopped"][0]["step"] == 4 and written["runs"]["fp8"]["loss_steps"] == [1, 2, 3]
    assert png_path.read_bytes().startswith(b"\x89PNG")
    assert sorted(p.name for p in tmp_path.iterdir()) == [json_path.name, png_path.name]


def test_the_builtin_figure_has_both_curves_axis_titles_the_ratio_and_the_stop() -> None:
    a, b = _sides()
    fig = compare.figure_of(compare.summarize(a, b, "cpu", 1, False), a, b)
    assert "x1.25" in fig.title and "fp8/bf16" in fig.title
    losses, difference = figure.builtin_panels(fig)
    assert (losses.x_label, losses.y_label) == ("optimizer step", "training loss (nats)")
    assert difference.y_label == "loss fp8 - bf16"
    assert [m.label for m in losses.marks] == [
        "fp8 stopped at step 4: loss is nan and grad norm is nan"
    ]
    # B is drawn over A where they coincide: A is wider, B dashed, so A stays visible
    same = figure.AbFigure("bf16", "fp8", sorted(CURVE.items()), sorted(CURVE.items()), 1.0)
    _, _, pixels = decode(figure.builtin_chart(same))
    colours = [pixels[i : i + 3] for i in range(0, len(pixels), 3)]
    blue, orange = colours.count(bytes(PALETTE[0])), colours.count(bytes(PALETTE[1]))
    assert blue > 400 and orange > 200, (blue, orange)
    _, _, stopped_pixels = decode(figure.builtin_chart(fig))
    assert bytes(RED) in {stopped_pixels[i : i + 3] for i in range(0, len(stopped_pixels), 3)}


def test_compare_refuses_a_fault_for_a_preset_it_does_not_train(run_cli: RunCli) -> None:
    res = run_cli("train", *QUICK, "--compare", "bf16,fp8", "--inject-fault", "fp16:nan@2")
    assert res.code == BadInput.exit_code and "not one of the compared presets" in res.err
    res = run_cli("train", *QUICK, "--preset", "bf16", "--inject-fault", "fp8:nan@2")
    assert res.code == BadInput.exit_code and "names preset fp8" in res.err


@pytest.mark.integration
def test_a_side_that_stops_still_gets_its_json_and_figure(
    run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(figure, "matplotlib_available", lambda: False)  # as in the images
    metrics = tmp_path / "m.jsonl"
    res = run_cli(
        "train", *QUICK, "--compare", "bf16,fp8-fwd", "--steps", "4",
        "--inject-fault", "fp8-fwd:nan@3", "--ckpt-dir", str(tmp_path),
        "--metrics-file", str(metrics),
    )  # fmt: skip
    assert res.code == EXIT_NUMERICAL
    assert res.err.strip().splitlines()[-1].startswith("error: --compare: side fp8-fwd: step 3:")
    summary = json.loads((tmp_path / "compare_bf16_vs_fp8-fwd.json").read_text())
    (stop,) = summary["stopped"]
    assert (stop["side"], stop["step"], stop["status"]) == ("fp8-fwd", 3, "numerical_stop")
    assert "loss is nan" in stop["reason"] and summary["png_renderer"] == "builtin"
    assert summary["runs"]["bf16"]["loss_steps"] == [1, 2, 3, 4]  # the other side finished
    assert summary["runs"]["fp8-fwd"]["loss_steps"] == [1, 2]
    assert (tmp_path / "compare_bf16_vs_fp8-fwd.png").read_bytes().startswith(b"\x89PNG")
    # interleaved, one log interval (here 1 step) at a time: neither side always runs first
    order = [(r["run"], r["step"]) for r in records(metrics)]
    assert order == [("bf16", 1), ("fp8-fwd", 1), ("bf16", 2), ("fp8-fwd", 2), ("bf16", 3),
                     ("bf16", 4)]  # fmt: skip


@pytest.mark.integration
def test_a_signal_stops_both_sides_and_still_writes_what_they_trained(
    run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainer import train_step

    real_agree, calls = train_step.agree_stop, {"n": 0}

    def agree(run: object, stop: object) -> float:
        calls["n"] += 1
        if calls["n"] == 3:  # bf16's step 2 (the sides alternate every step): SIGTERM arrives
            stop.signum = 15  # type: ignore[attr-defined]
        return real_agree(run, stop)  # type: ignore[arg-type]

    monkeypatch.setattr(train_step, "agree_stop", agree)
    res = run_cli(
        "train", *QUICK, "--compare", "bf16,fp8-fwd", "--steps", "4", "--ckpt-dir", str(tmp_path)
    )
    # compare runs write no checkpoint: a stop saves nothing, so 4, not 143 (docs/trainer.md)
    assert res.code == EXIT_STOPPED_UNSAVED, res.err
    assert "nothing saved" in res.err and "--resume" not in res.err
    summary = json.loads((tmp_path / "compare_bf16_vs_fp8-fwd.json").read_text())
    assert {s["side"]: s["status"] for s in summary["stopped"]} == {
        "bf16": "interrupted",
        "fp8-fwd": "interrupted",
    }
    assert summary["runs"]["bf16"]["loss_steps"] == [1, 2]


def test_the_cpu_note_speaks_of_fp8_only_when_a_side_trained_in_fp8() -> None:
    def side(name: str, fp8: bool) -> compare.Side:
        return compare.Side(name, dict(CURVE), 100.0, 1.0, None, "finished", fp8=fp8)

    plain = compare.summarize(side("bf16", False), side("fp32", False), "cpu", 0, False)
    assert (
        "FP8" not in plain["throughput_note"]
        and "measure speed on the GPU" in plain["throughput_note"]
    )
    fp8 = compare.summarize(side("bf16", False), side("fp8", True), "cpu", 0, False)
    assert "meaningless for FP8" in fp8["throughput_note"]
    assert (
        compare.summarize(side("bf16", False), side("fp8", True), "cuda", 0, False)[
            "throughput_note"
        ]
        is None
    )
