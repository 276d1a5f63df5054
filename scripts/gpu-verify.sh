#!/usr/bin/env bash
# The verify checks that need a GPU but no container engine, in one call, on a CUDA machine
# with torch installed (e.g. a lent GPU box without podman):
#   1. nvidia-smi lists >= 1 GPU (name, compute capability, driver);
#   2. the arch flags of this torch (torch._C._cuda_getArchFlags()) include the GPU's arch, and
#      agree with a fatbin scan of this torch's own libtorch_cuda.so (builder/fatbin.py), and
#      `trainimg arches` says every torch library runs on the GPU;
#   3. the bundled trainer runs a few BF16, FP8-fwd and FP8 steps ON THE GPU: finite, falling
#      loss, fp32 masters losing no updates (FP8 only on sm_89+; below that it is reported as
#      skipped, not passed); the MXFP8 recipe trains on sm_100+ and is refused (exit 2, naming
#      sm_100) below.
# Prints a table and writes gpu-verify.json to $OUT (default ./gpu-verify-out). Exit 0 only
# when nothing failed. Runs in about a minute; needs the repo (builder/, trainer/) and torch
# (+ torchao for FP8) in $PYTHON.
#
#   scripts/gpu-verify.sh                 # python3 from PATH
#   PYTHON=/opt/venv/bin/python STEPS=30 scripts/gpu-verify.sh
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
STEPS=${STEPS:-20}
OUT=${OUT:-gpu-verify-out}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
. scripts/torchao-wheels.sh  # TORCHAO_WHEELS=DIR: torchao beside a preinstalled torch

"$PYTHON" - "$OUT" "$STEPS" <<'PY'
import datetime as dt
import json
import math
import os
import shutil
import subprocess
import sys
import time

out_dir, steps = sys.argv[1], int(sys.argv[2])
results = []  # (check, outcome, detail)


def record(check, outcome, detail):
    results.append({"check": check, "outcome": outcome, "detail": detail})
    print(f"  {outcome.upper():<7} {check:<22} {detail}", flush=True)


def sh(*cmd, timeout=600):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


print(f"gpu-verify {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}")
gpu_cc = None
gpu_name = None
# 1. nvidia-smi
if shutil.which("nvidia-smi") is None:
    record("nvidia_smi", "failed", "nvidia-smi not on PATH: no NVIDIA driver here?")
else:
    p = sh("nvidia-smi", "--query-gpu=index,name,compute_cap,driver_version",
           "--format=csv,noheader")
    rows = [r.split(", ") for r in p.stdout.strip().splitlines() if r.strip()]
    if p.returncode != 0 or not rows:
        record("nvidia_smi", "failed", f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-300:]}")
    else:
        gpu_name, cc = rows[0][1], rows[0][2]
        gpu_cc = tuple(int(x) for x in cc.split("."))
        record("nvidia_smi", "passed",
               "; ".join(f"GPU {r[0]}: {r[1]} (CC {r[2]}, driver {r[3]})" for r in rows))

# 2. torch arch flags, fatbin scan, coverage
try:
    import torch
except Exception as exc:  # noqa: BLE001
    record("torch", "failed", f"torch does not import: {exc!r}")
    torch = None
if torch is not None:
    flags = torch._C._cuda_getArchFlags().split() if hasattr(torch._C, "_cuda_getArchFlags") else []
    record("torch", "passed" if torch.version.cuda else "failed",
           f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
           f"cuda.is_available()={torch.cuda.is_available()}, get_arch_list()={torch.cuda.get_arch_list()}")
    if not flags:
        record("arch_flags", "failed", "not a CUDA build: torch._C._cuda_getArchFlags is absent")
    else:
        from builder import arches
        from builder.fatbin import scan_file, scan_paths

        lib_dir = os.path.join(os.path.dirname(torch.__file__), "lib")
        core = scan_file(os.path.join(lib_dir, "libtorch_cuda.so"))
        every = core.in_every_container("sass")
        agree = flags == every
        record("arch_flags_vs_fatbin", "passed" if agree else "failed",
               f"_cuda_getArchFlags: {' '.join(flags)} | fatbin scan (every module): {' '.join(every)}")
        if gpu_cc is not None:
            sm = f"sm_{gpu_cc[0]}{gpu_cc[1]}"
            covs = [arches.library_coverage(lib.to_dict(), gpu_cc)
                    for lib in scan_paths([lib_dir]).libraries]
            verdict = arches.overall(covs)
            record("arch_covers_gpu", "failed" if verdict == "no" else "passed",
                   f"{gpu_name} ({sm}): {verdict}; "
                   + "; ".join(f"{os.path.basename(c.path)}: {c.verdict}" for c in covs))

# 3. trainer steps on the GPU
fp8_ok = gpu_cc is not None and gpu_cc >= (8, 9)
for preset in ("bf16", "fp8-fwd", "fp8"):
    check = f"train_{preset.replace('-', '_')}"
    if gpu_cc is None:
        record(check, "skipped", "no GPU found by nvidia-smi")
        continue
    if preset != "bf16" and not fp8_ok:
        record(check, "skipped", f"{gpu_name} (CC {gpu_cc[0]}.{gpu_cc[1]}) has no FP8 tensor cores")
        continue
    metrics = os.path.join(out_dir, f"{preset}.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    start = time.monotonic()
    p = sh(sys.executable, "-m", "trainer", "train", "--preset", preset, "--model", "tiny",
           "--data", "synthetic", "--steps", str(steps), "--log-interval", "1",
           "--eval-interval", "0", "--device", "cuda", "--metrics-file", metrics)
    took = time.monotonic() - start
    if p.returncode != 0:
        record(check, "failed", f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-400:]}")
        continue
    recs = [json.loads(ln) for ln in open(metrics) if ln.strip().startswith("{")]
    losses = [float(r["loss"]) for r in recs if r.get("event") == "train" and "loss" in r]
    ok = len(losses) >= 2 and all(math.isfinite(x) for x in losses) and losses[-1] < losses[0]
    unchanged = [r.get("unchanged_frac") for r in recs if r.get("event") == "train"]
    ok = ok and all(u is not None and u < 0.01 for u in unchanged)
    tps = [r.get("tokens_per_s") for r in recs if r.get("event") == "train"]
    record(check, "passed" if ok else "failed",
           f"{len(losses)} steps on {gpu_name} in {took:.1f}s; loss "
           f"{losses[0]:.4f} -> {losses[-1]:.4f}; tokens/s {tps[-1]:.0f}" if losses else "no loss")

# 4. MXFP8: block-scaled FP8 needs sm_100; below it the trainer must refuse with the reason
if gpu_cc is not None:
    mx = ("--preset", "fp8", "--fp8-recipe", "mxfp8", "--backward-matmul", "fp8_e4m3")
    p = sh(sys.executable, "-m", "trainer", "train", *mx, "--model", "small", "--steps", "4",
           "--eval-interval", "0", "--device", "cuda")
    if gpu_cc < (10, 0):
        refused = p.returncode == 2 and "sm_100" in p.stderr and "Traceback" not in p.stderr
        record("mxfp8_refused", "passed" if refused else "failed",
               f"exit {p.returncode}: {p.stderr.strip().splitlines()[-1][:200] if p.stderr else ''}")
    else:
        record("mxfp8_trains", "passed" if p.returncode == 0 else "failed",
               f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-300:]}")

summary = {o: sum(1 for r in results if r["outcome"] == o) for o in ("passed", "failed", "skipped")}
doc = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "gpu": gpu_name,
       "compute_capability": ".".join(map(str, gpu_cc)) if gpu_cc else None,
       "results": results, "summary": summary}
with open(os.path.join(out_dir, "gpu-verify.json"), "w") as f:
    json.dump(doc, f, indent=2)
print(f"{summary['passed']} passed, {summary['failed']} failed, {summary['skipped']} skipped")
sys.exit(1 if summary["failed"] else 0)
PY
