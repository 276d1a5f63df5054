"""`python -m trainer {train,gate,info}`: the image's ENTRYPOINT.

Every failure the user can act on becomes one line on stderr and an exit code (see
EXIT_CODES_HELP); a traceback means a bug in the trainer. Over 400 lines: `train` and `gate`
share the flag groups defined here, and both parsers are read in one place.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from trainer import __version__, config, configfile, distributed, gate
from trainer.compare_run import train_compare
from trainer.config import OTHER_CHOICES, PRECISION_CHOICES, RunConfig
from trainer.configfile import parse_set
from trainer.distributed import Dist
from trainer.errors import BadInput, Interrupted, TrainerError
from trainer.gate_run import GateRequest, plan_gate, run_gate
from trainer.info import collect, human
from trainer.metrics import Sink
from trainer.model import SIZES
from trainer.presets import LAYERING_KEYS, PRESETS
from trainer.run import train
from trainer.signals import StopRequest

EXIT_CODES_HELP = """\
exit codes:
  0    training finished (or reached --stop-at); a checkpoint was written if --ckpt-dir is set
  2    bad input, found before training: unknown precision names or impossible combinations,
       NaN/Inf or out-of-range numbers, missing/empty/short data file, unwritable checkpoint
       dir, a memory estimate beyond the device, a corrupt or mismatched checkpoint on
       --resume (see --resume-anyway), a sequence length the model cannot take, FP8 on a GPU
       below sm_89, bad flags; during the run: a metrics file or checkpoint the disk refuses,
       out of memory in a step
  3    numerical stop: NaN/Inf in loss or grad norm (stopped before the optimizer step; the
       last checkpoint is untouched), NaN/Inf weights when a checkpoint is due (not written),
       fp16 loss scale below its floor, or a loss spike with health.spike_action stop
  4    stopped by SIGTERM/SIGINT with nothing saved (no --ckpt-dir): nothing to resume from
  5    `gate`: the candidate failed the quality gate (gate.json says why)
  130  SIGINT, 143 SIGTERM (podman stop): the current step finished, a checkpoint was saved,
       clean exit; start again with --resume to continue
"""

GATE_EXIT_CODES_HELP = """\
exit codes:
  0    pass: the candidate's loss and grad-norm traces lie within the reference's band
  2    bad input, found before training: fewer than 3 seeds, an unknown preset, a bad --k or
       --max-outside, and everything `train` refuses
  3    a reference run stopped (NaN/Inf): there is no band to learn from
  4    stopped by SIGTERM/SIGINT (the gate writes no checkpoints)
  5    fail: too many steps outside the band, the final loss outside it, or the candidate
       stopped (NaN/Inf); gate.json and gate.png are written either way
"""

# the precision layering keys (presets.LAYERING_KEYS), plus how FP8 is done
_PRECISION_FLAGS = (*LAYERING_KEYS, "fp8_recipe", "fp8_backend")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _train_parser(sub: Any) -> None:
    p = sub.add_parser(
        "train",
        help="train a model",
        description=(
            "Train the bundled decoder-only transformer. Settings come from built-in defaults, "
            "then --preset, then --config FILE (YAML, TOML or JSON), then the flags below. "
            "Without any file it trains the tiny model on synthetic data."
        ),
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_input_args(p)
    _add_schedule_args(p)
    _add_checkpoint_args(p)
    _add_metrics_args(p)
    _add_precision_args(p)
    _add_experiment_args(p)
    p.set_defaults(func=_cmd_train)


def _add_input_args(p: argparse.ArgumentParser, preset: bool = True) -> None:
    """Where the settings, the model and the data come from."""
    p.add_argument("--config", metavar="FILE", help="config file (.yaml, .toml or .json)")
    if preset:
        p.add_argument("--preset", choices=list(PRESETS), help="precision preset (default fp8-fwd)")
    p.add_argument("--model", choices=list(SIZES), help="model size (default tiny)")
    p.add_argument(
        "--data", metavar="SOURCE", help="'synthetic', a .bin token file or a text file (bytes)"
    )
    p.add_argument("--data-format", choices=OTHER_CHOICES[("data", "format")])
    p.add_argument("--token-dtype", choices=OTHER_CHOICES[("data", "token_dtype")])
    p.add_argument("--seq-len", type=int, metavar="N")


def _add_schedule_args(p: argparse.ArgumentParser) -> None:
    """Batch, steps, seed, device and parallelism, compilation and recompute."""
    p.add_argument("--batch-size", type=int, metavar="N", help="global sequences per step")
    p.add_argument("--grad-accum", type=int, metavar="N")
    p.add_argument("--lr", type=float, metavar="LR", help="peak learning rate")
    p.add_argument("--steps", type=int, metavar="N", help="optimizer steps of the whole run")
    p.add_argument(
        "--stop-at", type=int, metavar="STEP", help="stop (checkpointed) at STEP of --steps"
    )
    p.add_argument("--seed", type=int, metavar="N", help="init and data seed (default 1234)")
    p.add_argument("--device", metavar="DEV", help="auto (default), cpu, cuda or cuda:N")
    p.add_argument("--parallel", choices=OTHER_CHOICES[("train", "parallel")])
    p.add_argument("--eval-interval", type=int, metavar="N", help="0 disables evaluation")
    p.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="torch.compile the blocks (default: on for FP8 on CUDA with a C compiler)",
    )
    p.add_argument(
        "--activation-checkpointing", choices=OTHER_CHOICES[("train", "activation_checkpointing")]
    )


def _add_checkpoint_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ckpt-dir", metavar="DIR", help="checkpoint directory (e.g. /ckpt)")
    p.add_argument(
        "--resume",
        nargs="?",
        const="latest",
        metavar="PATH",
        help="continue from the newest checkpoint in --ckpt-dir (or PATH)",
    )
    p.add_argument(
        "--resume-anyway",
        action="store_true",
        default=None,
        help="resume although the data, seed, shape, precision or world size changed",
    )
    p.add_argument("--keep-last", type=int, metavar="N", help="checkpoints to keep (default 3)")
    p.add_argument("--checkpoint-interval", type=int, metavar="N", help="steps between checkpoints")


def _add_metrics_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metrics-file", metavar="FILE", help="append JSONL metrics here")
    p.add_argument("--log-interval", type=int, metavar="N")
    p.add_argument(
        "--tensorboard-dir", metavar="DIR", help="also write TensorBoard events (needs tensorboard)"
    )
    p.add_argument(
        "--profile",
        type=int,
        metavar="STEPS",
        help="trace STEPS steps (after 2 warm-up steps) with torch.profiler into "
        "profile_rank<R>.json in --ckpt-dir (or metrics.profile_dir, or .)",
    )


def _add_precision_args(p: argparse.ArgumentParser) -> None:
    for key in _PRECISION_FLAGS:
        p.add_argument(_flag(key), choices=PRECISION_CHOICES[key], help=f"precision.{key}")
    p.add_argument(
        "--stochastic-rounding",
        action="store_true",
        default=None,
        help="round bf16 master weights stochastically (precision.stochastic_rounding)",
    )
    p.add_argument(
        "--sensitive-layers",
        metavar="LIST",
        help="layers kept out of FP8, comma-separated "
        "(default embedding,head,first_block,last_block)",
    )


def _add_experiment_args(p: argparse.ArgumentParser, compare: bool = True) -> None:
    """Health action, A/B comparison, injected faults and any other config key."""
    p.add_argument("--spike-action", choices=OTHER_CHOICES[("health", "spike_action")])
    if compare:
        p.add_argument(
            "--compare",
            metavar="A,B",
            help="A/B: train presets A and B from the same init and data, interleaved and "
            "compiled alike; write a PNG and JSON (also when one side stops)",
        )
    p.add_argument(
        "--inject-fault",
        metavar="[PRESET:]nan@STEP",
        help="make the loss NaN (or inf@STEP; weight-nan@STEP: a weight; weight-scale@STEP: one "
        "layer's weight x8) at STEP; a PRESET: prefix hits only that preset's runs (one side of "
        "--compare); under gate only the candidate is hit",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="any config key, e.g. --set train.weight_decay=0.0 (repeatable)",
    )


def _gate_parser(sub: Any) -> None:
    p = sub.add_parser(
        "gate",
        help="FP8 quality gate: a candidate preset against a reference's run-to-run band",
        description=(
            "Train the reference preset with --seeds seeds (--seed, --seed + 1, ...) and learn\n"
            "a band from their spread (per step: mean +- K sd, at least 1 % of the mean for the\n"
            "loss, 10 % for the grad norm); train the candidate with --candidate-seed (default:\n"
            "the first seed, the same init and batches) and fail it when more than --max-outside\n"
            "of its loss or grad-norm steps, or its final loss (the last 10 % of the steps), fall\n"
            "outside. Same model, data, steps and tokens for every run; no checkpoints. Writes\n"
            "gate.json and gate.png to --out (docs/trainer.md, Quality gate)."
        ),
        epilog=GATE_EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--reference", required=True, choices=list(PRESETS), help="e.g. bf16")
    p.add_argument("--candidate", required=True, choices=list(PRESETS), help="e.g. fp8")
    p.add_argument(
        "--seeds",
        type=int,
        default=gate.MIN_SEEDS,
        metavar="N",
        help=f"reference runs (default and minimum {gate.MIN_SEEDS})",
    )
    p.add_argument(
        "--candidate-seed",
        type=int,
        metavar="N",
        help="the candidate's seed (default: --seed, the first reference seed)",
    )
    p.add_argument("--out", default=".", metavar="DIR", help="where gate.json and gate.png go")
    p.add_argument(
        "--k",
        type=float,
        default=gate.K,
        metavar="K",
        help=f"band half width in reference standard deviations (default {gate.K:g})",
    )
    p.add_argument(
        "--max-outside",
        type=float,
        default=gate.MAX_OUTSIDE,
        metavar="FRACTION",
        help=f"steps allowed outside the band (default {gate.MAX_OUTSIDE:g})",
    )
    _add_input_args(p, preset=False)
    _add_schedule_args(p)
    p.add_argument("--metrics-file", metavar="FILE", help="append every run's JSONL metrics here")
    p.add_argument("--log-interval", type=int, metavar="N")
    _add_precision_args(p)
    _add_experiment_args(p, compare=False)
    p.set_defaults(func=_cmd_gate)


_FLAG_KEYS: dict[str, tuple[str, str]] = {
    "model": ("model", "size"),
    "data": ("data", "source"),
    "data_format": ("data", "format"),
    "token_dtype": ("data", "token_dtype"),
    "seq_len": ("data", "seq_len"),
    "batch_size": ("train", "batch_size"),
    "grad_accum": ("train", "grad_accum"),
    "lr": ("train", "lr"),
    "steps": ("train", "steps"),
    "stop_at": ("train", "stop_at"),
    "seed": ("train", "seed"),
    "device": ("train", "device"),
    "parallel": ("train", "parallel"),
    "eval_interval": ("train", "eval_interval"),
    "compile": ("train", "compile"),
    "activation_checkpointing": ("train", "activation_checkpointing"),
    "inject_fault": ("train", "inject_fault"),
    "ckpt_dir": ("checkpoint", "dir"),
    "resume": ("checkpoint", "resume"),
    "resume_anyway": ("checkpoint", "resume_anyway"),
    "keep_last": ("checkpoint", "keep_last"),
    "checkpoint_interval": ("precision", "checkpoint_interval"),
    "metrics_file": ("metrics", "file"),
    "log_interval": ("metrics", "log_interval"),
    "tensorboard_dir": ("metrics", "tensorboard_dir"),
    "profile": ("metrics", "profile_steps"),
    "spike_action": ("health", "spike_action"),
    "stochastic_rounding": ("precision", "stochastic_rounding"),
} | {key: ("precision", key) for key in _PRECISION_FLAGS}


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The flags that were given, as a nested config mapping (over --set)."""
    out = parse_set(args.set)
    for attr, (section, key) in _FLAG_KEYS.items():
        value = getattr(args, attr, None)  # gate has no checkpoint flags
        if value is not None:
            out.setdefault(section, {})[key] = value
    if args.sensitive_layers is not None:
        layers = [x.strip() for x in args.sensitive_layers.split(",") if x.strip()]
        out.setdefault("precision", {})["sensitive_layers"] = layers
    return out


def _session(
    cfg: RunConfig, args: argparse.Namespace, body: Callable[[Dist, Sink, StopRequest], object]
) -> None:
    """The process around a command's runs: signals, the process group and the metrics sink."""
    stop = StopRequest().install()
    sink: Sink | None = None
    every_rank = True  # every rank took this path: they can wait for each other at the end
    try:
        d = distributed.init(cfg.train)
        sink = Sink(cfg.metrics.file, enabled=d.is_main, tensorboard=cfg.metrics.tensorboard_dir)
        body(d, sink, stop)
    except BaseException as exc:
        every_rank = distributed.raised_on_every_rank(exc)
        raise
    finally:
        if sink is not None:
            sink.close()
        distributed.finish(every_rank)
        if args.restore_signals:
            stop.restore()


def _cmd_train(args: argparse.Namespace) -> int:
    file_data = configfile.load(args.config) if args.config else {}
    cfg = config.build(file_data, overrides(args), preset=args.preset)
    compare = None
    if args.compare is not None:
        compare = [x.strip() for x in args.compare.split(",")]
        if len(compare) != 2 or not all(compare) or compare[0] == compare[1]:
            raise BadInput(f"--compare {args.compare!r}: name two presets, e.g. bf16,fp8-fwd")
        unknown = ", ".join(name for name in compare if name not in PRESETS)
        if unknown:
            choices = ", ".join(PRESETS)
            raise BadInput(f"--compare: unknown preset(s) {unknown}; choose from {choices}")

    def body(d: Dist, sink: Sink, stop: StopRequest) -> None:
        if compare is not None:
            train_compare(cfg, compare, d, sink, stop)
        else:
            train(cfg, d, sink, stop)

    _session(cfg, args, body)
    return 0


def _cmd_gate(args: argparse.Namespace) -> int:
    request = GateRequest(
        args.reference,
        args.candidate,
        args.seeds,
        args.candidate_seed,
        args.k,
        args.max_outside,
        args.out,
    )
    file_data = configfile.load(args.config) if args.config else {}
    plan = plan_gate(request, file_data, overrides(args))
    codes: list[int] = []
    _session(
        plan.candidate_cfg, args, lambda d, sink, stop: codes.append(run_gate(plan, d, sink, stop))
    )
    return codes[0]


def _cmd_info(args: argparse.Namespace) -> int:
    data = collect()
    print(json.dumps(data) if args.json else human(data))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trainer",
        description="The trainimg FP8/BF16 trainer (runs as the image's ENTRYPOINT).",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"trainer {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{train,gate,info}")
    _train_parser(sub)
    _gate_parser(sub)
    info = sub.add_parser("info", help="report torch, CUDA, GPUs and FP8 support")
    info.add_argument("--json", action="store_true", help="one JSON object on stdout")
    info.set_defaults(func=_cmd_info)
    return parser


def train_entry() -> int:
    """The `train` console script: `train ARGS` is `python -m trainer train ARGS`."""
    return main(["train", *sys.argv[1:]], restore_signals=False)


def process_main() -> NoReturn:
    """`python -m trainer` (the image's ENTRYPOINT, torchrun's workers): main(), then
    os._exit with its code. Skipping interpreter finalization is the point: it would reset the
    signal handlers (a late `podman stop` would then kill a finished run) and tear down threads
    a process group leaves behind (FSDP2's gloo threads abort there, "terminate called without
    an active exception"). The output is flushed first; a bug still prints its traceback."""
    try:
        code = main(restore_signals=False)
    except SystemExit as exc:  # argparse: --help, bad flags (it printed why)
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None, *, restore_signals: bool = True) -> int:
    """Run a command; `restore_signals=False` (the process entry point) keeps SIGTERM/SIGINT
    handled until the process exits, so a signal after the run completed does not turn a
    finished run into a killed one (exit 0 stays 0)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.restore_signals = restore_signals
    if args.command is None:
        parser.print_help()
        return 0
    try:
        code: int = args.func(args)
    except Interrupted as exc:
        print(f"stopped: {exc}", file=sys.stderr)
        return exc.exit_code
    except TrainerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    return code
