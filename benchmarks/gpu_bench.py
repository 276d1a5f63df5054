"""BF16 vs FP8-fwd vs FP8 on one CUDA GPU with the bundled trainer (called by benchmarks/gpu.sh).

Each preset runs in its own `python -m trainer train` process (fresh memory statistics; an
FP8 failure cannot take the BF16 result with it) on the 760m model and synthetic data for a
fixed number of steps, all three compiled alike. Throughput and MFU are the means over the
second half of the run, after torch.compile and the allocator have warmed up. Without torchao,
or on a GPU below sm_89, only BF16 runs and the output says why. Prints a table and writes a
JSON file.

Targets (TARGETS), below each recipe's ceiling (the FP8 share of the step's FLOPs, Amdahl with
FP8 GEMMs at twice the BF16 rate: trainer/fp8/share.py, printed per preset): `fp8` is the
recipe for speed (all three GEMMs in FP8; 760m at seq 1024: at most x1.63) and should reach
x1.10 over BF16 at equal loss; `fp8-fwd` is the conservative recipe (BF16 backward; at most
x1.15) and should not be slower than BF16. Neither has been measured on a GPU yet.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from trainer.fp8 import rules  # noqa: E402 - after making the repo importable


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


# bench names that are a preset plus flags: row-wise scaling with E4M3 gradients (torchao's
# `rowwise` recipe), the recipe for Hopper's CUTLASS row-wise kernels
VARIANTS: dict[str, tuple[str, ...]] = {
    "fp8-rowwise": ("fp8", "--fp8-recipe", "rowwise", "--backward-matmul", "fp8_e4m3"),
}


def _train(preset: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    metrics = workdir / f"{preset}.jsonl"
    base, *extra = VARIANTS.get(preset, (preset,))
    cmd = [
        sys.executable, "-m", "trainer", "train",
        "--preset", base, *extra, "--model", args.model, "--data", "synthetic",
        "--set", f"model.vocab_size={args.vocab}", "--seq-len", str(args.seq_len),
        "--batch-size", str(args.batch_size), "--steps", str(args.steps),
        "--eval-interval", "0", "--log-interval", "5", "--device", args.device,
        "--metrics-file", str(metrics),
    ]  # fmt: skip
    if args.compile:
        cmd.append("--compile")
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    print(f"-- {preset}: {' '.join(cmd[3:])}", flush=True)
    try:
        proc = subprocess.run(
            cmd,
            env=env,
            cwd=REPO,
            timeout=args.timeout,
            text=True,
            capture_output=True,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"preset": preset, "ok": False, "error": f"timed out after {args.timeout} s"}
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return {
            "preset": preset,
            "ok": False,
            "exit_code": proc.returncode,
            "error": "\n".join(tail),
        }
    recs = [json.loads(line) for line in metrics.read_text().splitlines()]
    train = [r for r in recs if r["event"] == "train"]
    summary = next(r for r in recs if r["event"] == "summary")
    steady = [r for r in train if r["step"] > args.steps // 2] or train[-1:]

    def mean(key: str) -> float | None:
        values = [r[key] for r in steady if r.get(key) is not None]
        return sum(values) / len(values) if values else None

    return {
        "preset": preset,
        "ok": True,
        "tokens_per_s": mean("tokens_per_s"),
        "step_time_s": mean("step_time_s"),
        "mfu": mean("mfu"),
        "mfu_fp8": mean("mfu_fp8"),
        "peak_mem_gb": max(r["peak_mem_gb"] for r in train),
        "final_loss": summary["final_loss"],
        "fp8_layers": summary["fp8_layers"],
        "fp8_flops_share": summary.get("fp8_flops_share"),
        "fp8_speed_ceiling": summary.get("fp8_speed_ceiling"),
        "wall_s": summary["wall_s"],
    }


def plan_presets(
    torchao: str | None, device_problem: str | None, *, rowwise: bool = False
) -> tuple[list[str], list[str]]:
    """Which presets to run, and why FP8 is left out when it is (`rowwise`: fp8-rowwise too)."""
    if torchao is None:
        return ["bf16"], ["torchao is not installed: ran BF16 only (pip install torchao for FP8)"]
    if device_problem is not None:
        return ["bf16"], [f"ran BF16 only: {device_problem}"]
    return ["bf16", "fp8-fwd", "fp8"] + (["fp8-rowwise"] if rowwise else []), []


TARGETS = {
    "fp8": 1.10,
    "fp8-fwd": 1.00,
    "fp8-rowwise": 1.10,
}  # throughput over BF16 at equal loss (module doc)


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="760m")
    parser.add_argument("--vocab", type=int, default=32768)
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--no-compile", dest="compile", action="store_false")
    parser.add_argument("--timeout", type=int, default=170, help="seconds per preset")
    parser.add_argument("--rowwise", action="store_true", help="also fp8 with row-wise scaling")
    out = os.path.join(os.environ.get("OUT") or ".", "gpu_bench.json")
    parser.add_argument("--out", default=out, help="default: $OUT/gpu_bench.json")
    parser.add_argument("--device", default="cuda", help="cpu: a dry run of this script")
    return parser.parse_args()


def _print_table(
    name: str, cc: tuple[int, int], args: argparse.Namespace, results: list[dict[str, Any]]
) -> None:
    """One row per preset: throughput, step time, MFU, memory, loss and the FP8 share."""
    print(f"\n{name} (CC {cc[0]}.{cc[1]}), torch {torch.__version__}, model {args.model}, "
          f"seq {args.seq_len} x batch {args.batch_size}, {args.steps} steps")  # fmt: skip
    header = (
        f"{'preset':<9}{'tok/s/GPU':>12}{'ms/step':>10}{'MFU':>8}{'peak GB':>9}{'final loss':>12}"
        f"{'FP8 layers':>12}{'FP8 FLOPs':>11}{'ceiling':>9}"
    )
    print(header)
    for r in results:
        if not r["ok"]:
            print(f"{r['preset']:<9} FAILED: {r['error']}")
            continue
        step_ms = r["step_time_s"] * 1e3 if r["step_time_s"] else None
        ceiling = r["fp8_speed_ceiling"]
        print(
            f"{r['preset']:<9}{_fmt(r['tokens_per_s'], ',.0f'):>12}{_fmt(step_ms, '.1f'):>10}"
            f"{_fmt(r['mfu'], '.1%'):>8}{r['peak_mem_gb']:>9.1f}{r['final_loss']:>12.4f}"
            f"{r['fp8_layers']:>12}{_fmt(r['fp8_flops_share'], '.0%'):>11}"
            f"{'-' if ceiling is None else f'x{ceiling:.2f}':>9}"
        )


def _speedups(ok: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Each FP8 preset's throughput over BF16 (printed with its target, ceiling and loss gap)."""
    speedups: dict[str, float] = {}
    base = ok.get("bf16", {}).get("tokens_per_s")
    for fp8 in ("fp8-fwd", "fp8", "fp8-rowwise"):
        if base and fp8 in ok and ok[fp8]["tokens_per_s"]:
            speedups[fp8] = ok[fp8]["tokens_per_s"] / base
            loss_gap = ok[fp8]["final_loss"] - ok["bf16"]["final_loss"]
            ceiling = ok[fp8]["fp8_speed_ceiling"]
            print(
                f"{fp8} / bf16 throughput: x{speedups[fp8]:.3f} (target >= x{TARGETS[fp8]:.2f}, "
                f"ceiling x{ceiling or 1:.2f}), final loss {loss_gap:+.4f}"
            )
    return speedups


def main() -> int:
    args = _parse_args()

    if args.device == "cuda":
        if not torch.cuda.is_available():
            print("gpu_bench: no CUDA device visible to torch; nothing to measure", file=sys.stderr)
            return 2
        name = torch.cuda.get_device_name(0)
        cc = torch.cuda.get_device_capability(0)
        problem = rules.device_problem(name, cc, "tensorwise")
    else:  # a CPU dry run of this script (its test); FP8 runs there through CPU _scaled_mm
        name, cc, problem = "cpu", (0, 0), None
    presets, notes = plan_presets(_version("torchao"), problem, rowwise=args.rowwise)
    has_cc = os.environ.get("CC") or any(shutil.which(c) for c in ("cc", "gcc", "clang"))
    if args.compile and not has_cc:
        args.compile = False
        notes.append("no C compiler for torch.compile: ran eager (torchao FP8 is slow uncompiled)")
    for note in notes:
        print(f"note: {note}", flush=True)

    with tempfile.TemporaryDirectory(prefix="gpu_bench_") as tmp:
        results = [_train(p, args, Path(tmp)) for p in presets]

    _print_table(name, cc, args, results)
    ok = {r["preset"]: r for r in results if r["ok"]}
    speedups = _speedups(ok)
    speedup = speedups.get("fp8-fwd")
    report = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "gpu": name,
        "compute_capability": f"{cc[0]}.{cc[1]}",
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "torchao": _version("torchao"),
        "settings": vars(args),
        "notes": notes,
        "results": results,
        "fp8_fwd_speedup": speedup,
        "speedups": speedups,
        "targets": TARGETS,
        "met": {name: ratio >= TARGETS[name] for name, ratio in speedups.items()},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
