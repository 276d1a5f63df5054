#!/usr/bin/env bash
# The verify checks that need a GPU but no container engine, in one call that fits a lent GPU
# machine (one command of at most 600 s; at most 8 result files of 16 MiB each under $OUT):
#   1. nvidia-smi lists >= 1 GPU (name, compute capability, driver);
#   2. the arch flags of this torch (torch._C._cuda_getArchFlags()) include the GPU's arch, and
#      agree with a fatbin scan of this torch's own libtorch_cuda.so (builder/arches/fatbin.py), and
#      `trainimg arches` says every torch library runs on the GPU;
#   3. torchao imports (else FP8 would silently drop out: a failed check, not a skip);
#   4. the bundled trainer ON THE GPU, on the 125m model (torchao's size filter leaves 20 of its
#      Linears in FP8; the tiny model would train BF16 and pass): `--compare bf16,fp8` (both
#      sides compiled alike, interleaved) must convert FP8 layers, report finite FP8
#      statistics, lose no updates and end within 2 % of BF16's loss; fp8-fwd then trains 5
#      steps, checkpoints and resumes to 10. FP8 only on sm_89+; below that it is skipped. The
#      mxfp8 preset is refused (exit 2, naming sm_100) where torchao's MX kernels do not run;
#   5. benchmarks/gpu_bench.py: BF16 vs fp8-fwd vs fp8 (tensorwise) vs fp8-rowwise tok/s, MFU,
#      peak memory on the 760m model, compiled alike ($OUT/gpu_bench.json).
# Every step has its own deadline inside one budget (BUDGET, default 540 s): a step that runs
# out of time is recorded (outcome "timeout") and the script goes on; the JSON is always
# written. Checkpoints and metrics go to a scratch directory that is removed; $OUT gets
# gpu-verify.json, gpu_bench.json and compare_bf16_vs_fp8.json only. Exit 0 only when nothing
# failed or timed out.
#
# torchao: when $PYTHON cannot import it, it is installed first (pip --no-deps --target, torch
# untouched) from the wheels in TORCHAO_WHEELS, by default .torchao-wheels/ in this tree
# (git-ignored; fill it here with
#   pip download --no-deps --only-binary :all: --python-version 3.12 torchao==0.18.0 -d .torchao-wheels
# and carry it to the GPU machine with the tree).
#
#   scripts/gpu-verify.sh                 # python3 from PATH, on the GPU
#   scripts/gpu-verify.sh --dry-run       # the same script on the CPU, tiny sizes (CI)
#   PYTHON=/opt/venv/bin/python STEPS=30 BUDGET=540 OUT=/out scripts/gpu-verify.sh
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
DRY_RUN=0
case "${1:-}" in
    --dry-run) DRY_RUN=1 ;;
    "") ;;
    *) echo "usage: scripts/gpu-verify.sh [--dry-run]" >&2; exit 2 ;;
esac
PYTHON=${PYTHON:-python3}
STEPS=${STEPS:-$([ "$DRY_RUN" = 1 ] && echo 6 || echo 20)}
BUDGET=${BUDGET:-540}
OUT=${OUT:-gpu-verify-out}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ -z "${TORCHAO_WHEELS:-}" ] && [ -d .torchao-wheels ]; then
    TORCHAO_WHEELS=$PWD/.torchao-wheels
fi
. scripts/torchao-wheels.sh  # torchao beside a preinstalled torch, before anything imports it

"$PYTHON" - "$OUT" "$STEPS" "$BUDGET" "$DRY_RUN" <<'PY'
import datetime as dt
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

out_dir, steps, budget, dry = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "1"
started = time.monotonic()
deadline = started + budget
RESERVE = 10.0  # seconds kept back for writing the JSON
MIN_STEP = 5 if dry else 20  # a training step that cannot have this long is not started
work = tempfile.mkdtemp(prefix="gpu-verify-")  # checkpoints and metrics: never under $OUT
results = []  # {check, outcome, detail, seconds}


def record(check, outcome, detail, seconds=0.0):
    results.append({"check": check, "outcome": outcome, "detail": detail,
                    "seconds": round(seconds, 1)})
    print(f"  {outcome.upper():<7} {check:<26} {detail}", flush=True)


class Ran:
    """A finished or timed-out command: returncode 124 and timed_out when its deadline hit."""

    def __init__(self, returncode, stdout, stderr, seconds, timed_out=False, limit=0.0):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr
        self.seconds, self.timed_out, self.limit = seconds, timed_out, limit

    def tail(self, n=400):
        if self.timed_out:
            return f"timed out after {self.limit:.0f} s"
        return f"exit {self.returncode}: {(self.stderr or self.stdout).strip()[-n:]}"


def left():
    return deadline - RESERVE - time.monotonic()


def sh(*cmd, limit):
    """Run cmd with min(limit, what the budget has left) seconds; a timeout is a result."""
    limit = max(1.0, min(limit, left()))
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, check=False)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout
        return Ran(124, out or "", "", time.monotonic() - t0, timed_out=True, limit=limit)
    return Ran(p.returncode, p.stdout, p.stderr, time.monotonic() - t0)


def outcome_of(ran, problems=()):
    if ran.timed_out:
        return "timeout"
    return "failed" if ran.returncode != 0 or problems else "passed"


def enough(check, need):
    """Whether `need` seconds are left; otherwise the step is recorded as a timeout unrun."""
    if left() >= need:
        return True
    record(check, "timeout", f"not started: {max(0, left()):.0f} s of the budget left, needs {need} s")
    return False


print(f"gpu-verify {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}"
      f"{' (dry run on the CPU)' if dry else ''}, budget {budget:.0f} s")
gpu_cc = None
gpu_name = None
# 1. nvidia-smi
if dry:
    record("nvidia_smi", "skipped", "dry run: no GPU asked for")
elif shutil.which("nvidia-smi") is None:
    record("nvidia_smi", "failed", "nvidia-smi not on PATH: no NVIDIA driver here?")
else:
    p = sh("nvidia-smi", "--query-gpu=index,name,compute_cap,driver_version",
           "--format=csv,noheader", limit=30)
    rows = [r.split(", ") for r in p.stdout.strip().splitlines() if r.strip()]
    if p.returncode != 0 or not rows:
        record("nvidia_smi", outcome_of(p, ["no rows"]), p.tail(300), p.seconds)
    else:
        gpu_name, cc = rows[0][1], rows[0][2]
        gpu_cc = tuple(int(x) for x in cc.split("."))
        record("nvidia_smi", "passed",
               "; ".join(f"GPU {r[0]}: {r[1]} (CC {r[2]}, driver {r[3]})" for r in rows), p.seconds)

# 2. torch arch flags, fatbin scan, coverage
try:
    import torch
except Exception as exc:  # noqa: BLE001
    record("torch", "failed", f"torch does not import: {exc!r}")
    torch = None
if torch is not None and dry:
    record("torch", "passed", f"torch {torch.__version__} (dry run: arch checks skipped)")
    record("arch_flags_vs_fatbin", "skipped", "dry run: no GPU asked for")
elif torch is not None:
    flags = torch._C._cuda_getArchFlags().split() if hasattr(torch._C, "_cuda_getArchFlags") else []
    record("torch", "passed" if torch.version.cuda else "failed",
           f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
           f"cuda.is_available()={torch.cuda.is_available()}, get_arch_list()={torch.cuda.get_arch_list()}")
    if not flags:
        record("arch_flags", "failed", "not a CUDA build: torch._C._cuda_getArchFlags is absent")
    else:
        t0 = time.monotonic()
        try:
            from builder.arches import coverage as arches
            from builder.arches.fatbin import scan_file, scan_paths

            lib_dir = os.path.join(os.path.dirname(torch.__file__), "lib")
            core = scan_file(os.path.join(lib_dir, "libtorch_cuda.so"))
            every = core.in_every_container("sass")
            agree = flags == every
            record("arch_flags_vs_fatbin", "passed" if agree else "failed",
                   f"_cuda_getArchFlags: {' '.join(flags)} | fatbin scan (every module): {' '.join(every)}",
                   time.monotonic() - t0)
            if gpu_cc is not None:
                sm = f"sm_{gpu_cc[0]}{gpu_cc[1]}"
                covs = [arches.library_coverage(lib.to_dict(), gpu_cc)
                        for lib in scan_paths([lib_dir]).libraries]
                verdict = arches.overall(covs)
                record("arch_covers_gpu", "failed" if verdict == "no" else "passed",
                       f"{gpu_name} ({sm}): {verdict}; "
                       + "; ".join(f"{os.path.basename(c.path)}: {c.verdict}" for c in covs),
                       time.monotonic() - t0)
        except Exception as exc:  # noqa: BLE001 - a recorded result, never a crash
            record("arch_flags_vs_fatbin", "failed", f"{exc!r}", time.monotonic() - t0)

# 3. torchao (installed first by scripts/torchao-wheels.sh when TORCHAO_WHEELS has it)
p = sh(sys.executable, "-c", "import torchao; print(torchao.__version__)", limit=60)
torchao_version = p.stdout.strip().splitlines()[-1] if p.returncode == 0 and p.stdout.strip() else None
record("torchao", "passed" if torchao_version else outcome_of(p, ["missing"]),
       f"torchao {torchao_version}" if torchao_version else
       "torchao does not import: FP8 cannot run (carry a wheel in .torchao-wheels/); " + p.tail(200),
       p.seconds)

# 4. trainer steps on the GPU. The 125m model: torchao's size filter keeps 20 of its 49 Linears
# in FP8 on CUDA (the tiny model's 17 all stay BF16, so an FP8 check there would pass on BF16).
if dry:  # the CPU: no size filter, so the tiny model has FP8 layers; CPU torch._scaled_mm
    MODEL = ("--model", "tiny", "--seq-len", "32", "--batch-size", "2", "--eval-interval", "0",
             "--device", "cpu")
else:
    MODEL = ("--model", "125m", "--seq-len", "512", "--batch-size", "16", "--eval-interval", "0",
             "--device", "cuda")


def train(*args, limit):
    return sh(sys.executable, "-m", "trainer", "train", *MODEL, *args, limit=limit)


def read_jsonl(path):
    try:
        return [json.loads(ln) for ln in open(path) if ln.strip().startswith("{")]
    except OSError:
        return []


def fp8_problems(recs, preset, grads):
    """What a run that really trained FP8 must show: layers, finite statistics, kept updates."""
    train = [r for r in recs if r.get("event") == "train" and r.get("run", preset) == preset]
    summ = [r for r in recs if r.get("event") == "summary" and r.get("run", preset) == preset]
    out = []
    if not summ or not summ[-1].get("fp8_layers"):
        out.append("no FP8 layer converted")
    keys = ["fp8_input_amax_max", "fp8_input_scale_min"] + (["fp8_grad_amax_max"] if grads else [])
    for key in keys:
        if not all(r.get(key) is not None and math.isfinite(r[key]) for r in train):
            out.append(f"{key} missing or not finite")
    if any((r.get("unchanged_frac") or 0) >= 0.01 for r in train):
        out.append("updates lost (unchanged_frac >= 1 %)")
    losses = [r["loss"] for r in train]
    if len(losses) < 2 or not all(math.isfinite(x) for x in losses) or losses[-1] >= losses[0]:
        out.append(f"loss not finite and falling: {losses}")
    return out, summ[-1] if summ else {}


fp8_ok = dry or (gpu_cc is not None and gpu_cc >= (8, 9))
fp8_ok = fp8_ok and torchao_version is not None
if gpu_cc is None and not dry:
    record("train_compare_bf16_fp8", "skipped", "no GPU found by nvidia-smi")
elif not fp8_ok:
    record("train_compare_bf16_fp8", "skipped" if torchao_version else "failed",
           "no torchao" if not torchao_version else
           f"{gpu_name} (CC {gpu_cc[0]}.{gpu_cc[1]}) has no FP8 tensor cores")
elif enough("train_compare_bf16_fp8", MIN_STEP):
    # one compile decision for both sides, interleaved (trainer/compare_run.py)
    cdir = os.path.join(work, "compare")
    metrics = os.path.join(cdir, "m.jsonl")
    compile_flag = () if dry else ("--compile",)
    p = train("--compare", "bf16,fp8", "--steps", str(steps), "--log-interval", "2" if dry else "5",
              "--ckpt-dir", cdir, "--metrics-file", metrics, *compile_flag, limit=240)
    if p.returncode != 0:
        record("train_compare_bf16_fp8", outcome_of(p), p.tail(), p.seconds)
    else:
        doc_path = os.path.join(cdir, "compare_bf16_vs_fp8.json")
        doc = json.load(open(doc_path))
        shutil.copy(doc_path, os.path.join(out_dir, "compare_bf16_vs_fp8.json"))
        recs = read_jsonl(metrics)
        problems, summ = fp8_problems(recs, "fp8", grads=True)
        if not dry and not doc.get("compiled"):
            problems.append("the sides were not compiled")
        rel = (doc.get("loss_diff") or {}).get("final_rel")
        if rel is None or abs(rel) > 0.02:
            problems.append(f"final loss fp8 vs bf16 {rel} (more than 2 %)")
        runs = doc["runs"]
        detail = (
            f"tok/s bf16 {runs['bf16']['tokens_per_s'] or 0:,.0f} vs fp8 "
            f"{runs['fp8']['tokens_per_s'] or 0:,.0f} (x{doc['throughput_ratio'] or 0:.3f}, "
            f"ceiling x{summ.get('fp8_speed_ceiling') or 0:.2f}); loss delta "
            f"{(rel or 0):+.3%}; FP8 layers {summ.get('fp8_layers')}; peak GB bf16 "
            f"{runs['bf16']['peak_mem_gb'] or 0:.2f}, fp8 {runs['fp8']['peak_mem_gb'] or 0:.2f}"
        )
        record("train_compare_bf16_fp8", outcome_of(p, problems),
               detail + ("; " + "; ".join(problems) if problems else ""), p.seconds)

# fp8-fwd (or bf16 without FP8) with a checkpoint and a resume on the device: the
# device-mixing paths (the optimizer's unchanged-update count, the pre-checkpoint check)
preset = "fp8-fwd" if fp8_ok else "bf16"
check = f"train_{preset.replace('-', '_')}_resume"
if gpu_cc is None and not dry:
    record(check, "skipped", "no GPU found by nvidia-smi")
elif enough(check, MIN_STEP):
    rdir = os.path.join(work, "resume")
    metrics = os.path.join(rdir, "m.jsonl")
    half = 2 if dry else 5
    common = ("--preset", preset, "--steps", str(2 * half), "--log-interval", "1",
              "--checkpoint-interval", str(half), "--ckpt-dir", rdir, "--metrics-file", metrics)
    first = train(*common, "--stop-at", str(half), limit=90)
    second = train(*common, "--resume", limit=90) if first.returncode == 0 else first
    took = first.seconds + (second.seconds if second is not first else 0)
    if second.returncode != 0:
        record(check, outcome_of(second), second.tail(), took)
    else:
        recs = read_jsonl(metrics)
        problems, summ = fp8_problems(recs, preset, grads=False) if fp8_ok else ([], {})
        steps_seen = [r["step"] for r in recs if r.get("event") == "train"]
        if steps_seen != list(range(1, 2 * half + 1)):
            problems.append(f"steps {steps_seen}")
        record(check, outcome_of(second, problems),
               f"steps 1-{half}, checkpoint, resume {half + 1}-{2 * half} on {gpu_name or 'cpu'}; FP8 layers "
               f"{summ.get('fp8_layers', 0)}" + ("; " + "; ".join(problems) if problems else ""),
               took)
    shutil.rmtree(rdir, ignore_errors=True)

# 5. MXFP8 (the mxfp8 preset): torchao's MX kernels target sm_100/sm_103; elsewhere the trainer
# must refuse, naming the reason
if gpu_cc is not None and enough("mxfp8", 20):
    p = sh(sys.executable, "-m", "trainer", "train", "--preset", "mxfp8", "--model", "small",
           "--steps", "4", "--eval-interval", "0", "--device", "cuda", limit=120)
    if gpu_cc not in ((10, 0), (10, 3)):
        refused = p.returncode == 2 and "sm_100" in p.stderr and "Traceback" not in p.stderr
        record("mxfp8_refused", "passed" if refused else outcome_of(p, ["not refused"]),
               p.tail(200), p.seconds)
    else:
        fine = p.returncode in (0, 2) and "Traceback" not in p.stderr
        record("mxfp8_trains_or_names_why", "passed" if fine else outcome_of(p, ["traceback"]),
               p.tail(300), p.seconds)

# 6. the throughput table (benchmarks/gpu_bench.py): BF16 vs fp8-fwd vs fp8 vs fp8-rowwise
if gpu_cc is None and not dry:
    record("gpu_bench", "skipped", "no GPU found by nvidia-smi")
elif enough("gpu_bench", MIN_STEP):
    bench_out = os.path.join(out_dir, "gpu_bench.json")
    presets = 4 if fp8_ok else 1
    per_preset = int(max(10, (left() - 15) / presets))
    size = (("--device", "cpu", "--model", "tiny", "--vocab", "256", "--seq-len", "32",
             "--batch-size", "2", "--steps", "2", "--no-compile") if dry else
            ("--model", "760m", "--steps", "30"))
    p = sh(sys.executable, "benchmarks/gpu_bench.py", *size, "--rowwise", "--timeout",
           str(per_preset), "--out", bench_out, limit=per_preset * presets + 15)
    detail = p.tail(300)
    problems = []
    if os.path.exists(bench_out):
        bench = json.load(open(bench_out))
        rows = [r for r in bench["results"]]
        problems = [f"{r['preset']}: {r.get('error', '')[:120]}" for r in rows if not r["ok"]]
        detail = "; ".join(
            f"{r['preset']} {r['tokens_per_s'] or 0:,.0f} tok/s, MFU {r['mfu'] or 0:.1%}, "
            f"{r['peak_mem_gb']:.1f} GB, FP8 layers {r['fp8_layers']}"
            for r in rows if r["ok"]) + (f"; speedups {bench['speedups']}" if bench["speedups"] else "")
    record("gpu_bench", outcome_of(p, problems), detail + ("; " + "; ".join(problems) if problems else ""),
           p.seconds)

shutil.rmtree(work, ignore_errors=True)
outcomes = ("passed", "failed", "timeout", "skipped")
summary = {o: sum(1 for r in results if r["outcome"] == o) for o in outcomes}
doc = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "dry_run": dry,
       "gpu": gpu_name, "compute_capability": ".".join(map(str, gpu_cc)) if gpu_cc else None,
       "torchao": torchao_version, "budget_s": budget,
       "wall_s": round(time.monotonic() - started, 1), "results": results, "summary": summary}
tmp = os.path.join(out_dir, ".gpu-verify.json.tmp")
with open(tmp, "w") as f:
    json.dump(doc, f, indent=2)
os.replace(tmp, os.path.join(out_dir, "gpu-verify.json"))
print(", ".join(f"{summary[o]} {o}" for o in outcomes) + f" in {doc['wall_s']:.0f} s")
sys.exit(1 if summary["failed"] or summary["timeout"] else 0)
PY
