"""`trainer gate`: the runs behind the FP8 quality gate, one after the other, and its files.

The reference preset trains once per seed (--seeds N: the seeds --seed, --seed + 1, ...), then
the candidate with --candidate-seed (default: the first reference seed, so the candidate sees
the same init and batches as one band run and differs from it only in precision). Every run
has the same model, data source, steps and batch, so the same tokens; none writes a checkpoint.
trainer/gate.py judges the traces; `gate.json` and `gate.png` are written to --out (a
temporary file each, then renamed). A reference run that stops (NaN/Inf) leaves no band:
NumericalStop, exit 3. A candidate that stops fails the gate.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer import config, fault, gate, gate_figure
from trainer.config import RunConfig, deep_merge
from trainer.distributed import Dist
from trainer.errors import EXIT_GATE_FAILED, EXIT_OK, BadInput, NumericalStop
from trainer.metrics import Sink, json_safe
from trainer.outcome import Outcome
from trainer.run import start
from trainer.signals import StopRequest

KIND = "trainimg.trainer.gate"
SCHEMA = 1


@dataclass(frozen=True)
class GatePlan:
    """What the gate runs: one config per reference seed, the candidate's, and the rule."""

    reference: str
    candidate: str
    references: list[RunConfig]
    candidate_cfg: RunConfig
    rule: gate.Rule
    out_dir: str


@dataclass(frozen=True)
class GateRequest:
    """The gate's own flags."""

    reference: str
    candidate: str
    seeds: int
    candidate_seed: int | None  # None: the first reference seed
    k: float
    max_outside: float
    out_dir: str


def plan_gate(req: GateRequest, file_data: dict[str, Any], flags: dict[str, Any]) -> GatePlan:
    """Every run's config from the file and the flags, each checked as `train` checks its one,
    before the first run trains (BadInput, exit 2, otherwise)."""
    if req.seeds < gate.MIN_SEEDS:
        raise BadInput(
            f"--seeds {req.seeds}: the band needs at least {gate.MIN_SEEDS} reference runs "
            "(the spread of fewer seeds is no estimate of run-to-run noise)"
        )
    try:
        rule = gate.Rule(k=req.k, max_outside=req.max_outside)
    except ValueError as exc:
        raise BadInput(f"--k/--max-outside: {exc}") from exc
    base = config.build(file_data, flags, preset=req.reference)
    if base.train.stop_at is not None:
        raise BadInput(
            f"train.stop_at {base.train.stop_at}: the gate compares whole runs; set --steps instead"
        )
    injected = fault.parse(base.train.inject_fault, base.train.steps)
    if injected is not None and injected.preset not in (None, req.candidate):
        raise BadInput(
            f"--inject-fault {base.train.inject_fault!r} names preset {injected.preset}; "
            f"under gate it hits the candidate {req.candidate} only"
        )

    def run_cfg(preset: str, seed: int, fault_spec: str | None) -> RunConfig:
        train = {"seed": seed, "inject_fault": fault_spec}
        return config.build(file_data, deep_merge(flags, {"train": train}), preset=preset)

    first = base.train.seed
    seed = first if req.candidate_seed is None else req.candidate_seed
    return GatePlan(
        reference=req.reference,
        candidate=req.candidate,
        references=[run_cfg(req.reference, first + i, None) for i in range(req.seeds)],
        candidate_cfg=run_cfg(req.candidate, seed, fault.spec_for(injected, req.candidate)),
        rule=rule,
        out_dir=req.out_dir,
    )


def prepare_out(path: str) -> Path:
    """--out created and proven writable before any training (BadInput naming it otherwise)."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
        probe = p / f".write-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise BadInput(
            f"--out {path}: not a writable directory ({exc.strerror or exc}); pass another --out"
        ) from exc
    return p


@dataclass(frozen=True)
class _Trained:
    outcome: Outcome
    stopped: str | None  # the numerical stop's message
    fp8_layers: int  # layers it trained in FP8: a gate an FP8 recipe passed without any is void


def _train(cfg: RunConfig, d: Dist, sink: Sink, stop: StopRequest, label: str) -> _Trained:
    loop = start(cfg, d, sink, stop, label)
    fp8_layers = sum(1 for c in loop.run.fp8_layers if c.fp8)
    try:
        loop.train()
    except NumericalStop as exc:
        return _Trained(loop.outcome, str(exc), fp8_layers)
    return _Trained(loop.outcome, None, fp8_layers)


def _write(doc: dict[str, Any], out: Path) -> tuple[Path, Path]:
    json_path, png_path = out / "gate.json", out / "gate.png"
    tmp_png = out / ".gate.png.tmp"
    tmp_png.write_bytes(gate_figure.png(doc))
    tmp_png.replace(png_path)
    full = doc | {"png": str(png_path), "png_renderer": "builtin"}
    tmp_json = out / ".gate.json.tmp"
    tmp_json.write_text(json.dumps(json_safe(full), indent=1, allow_nan=False) + "\n")
    tmp_json.replace(json_path)
    return json_path, png_path


def report(doc: dict[str, Any]) -> list[str]:
    loss, norm, final = doc["loss"], doc["grad_norm"], doc["final_loss"]
    lines = [
        f"gate {doc['candidate']} vs {doc['reference']} "
        f"({len(doc['reference_seeds'])} seeds): {doc['verdict'].upper()}",
        f"  loss outside the band on {len(loss['outside_steps'])}/{len(loss['steps'])} steps, "
        f"grad norm on {len(norm['outside_steps'])}/{len(norm['steps'])} "
        f"(at most {doc['rule']['max_outside']:.0%} allowed)",
    ]
    if final["candidate"] is not None:
        lines.append(
            f"  final loss {final['candidate']:.4f}, band [{final['lo']:.4f}, {final['hi']:.4f}]"
        )
    lines += [f"  fail: {why}" for why in doc["why"]]
    return lines


def run_gate(plan: GatePlan, d: Dist, sink: Sink, stop: StopRequest) -> int:
    """Train the reference seeds and the candidate, judge, write; EXIT_OK or EXIT_GATE_FAILED."""
    out = prepare_out(plan.out_dir)
    refs: list[_Trained] = []
    for cfg in plan.references:
        label = f"{plan.reference}-seed{cfg.train.seed}"
        sink.say(f"== gate: reference {label} ==")
        trained = _train(cfg, d, sink, stop, label)
        if trained.stopped is not None:
            raise NumericalStop(
                f"gate: reference {label} stopped ({trained.stopped}): no band to learn from"
            )
        refs.append(trained)
    cand_seed = plan.candidate_cfg.train.seed
    label = f"{plan.candidate}-seed{cand_seed}"
    sink.say(f"== gate: candidate {label} ==")
    cand = _train(plan.candidate_cfg, d, sink, stop, label)
    result = gate.verdict(
        [r.outcome.losses for r in refs],
        [r.outcome.grad_norms for r in refs],
        cand.outcome.losses,
        cand.outcome.grad_norms,
        cand.stopped,
        plan.rule,
    )
    doc: dict[str, Any] = {
        "kind": KIND,
        "schema": SCHEMA,
        "reference": plan.reference,
        "candidate": plan.candidate,
        "reference_seeds": [cfg.train.seed for cfg in plan.references],
        "candidate_seed": cand_seed,
        "steps": plan.candidate_cfg.train.steps,
        "tokens": {  # matched: the same for every run (less for a candidate that stopped)
            "reference": [r.outcome.tokens for r in refs],
            "candidate": cand.outcome.tokens,
        },
        "fp8_layers": {"reference": refs[0].fp8_layers, "candidate": cand.fp8_layers},
        "inject_fault": plan.candidate_cfg.train.inject_fault,
        "candidate_status": cand.outcome.status,
        "candidate_stopped": cand.stopped,
    } | result
    if d.is_main:
        paths = _write(doc, out)
        for line in report(doc):
            sink.say(line)
        sink.say(f"gate: wrote {paths[0]} and {paths[1]}")
    return EXIT_OK if doc["verdict"] == "pass" else EXIT_GATE_FAILED
