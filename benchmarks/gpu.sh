#!/usr/bin/env bash
# BF16 vs FP8-fwd vs FP8 with the bundled trainer on a CUDA machine that has torch (no podman
# needed): the 760m model, synthetic data, a fixed number of steps per preset, torch.compile on
# for all three; prints a table and writes $OUT/gpu_bench.json (OUT default: .; tok/s per GPU, MFU, peak memory, final
# loss, FP8 layers, the FP8 share of the FLOPs and the speed-up ceiling it allows, FP8/BF16
# ratios against their targets: fp8 >= x1.10 (the recipe for speed; ceiling x1.63), fp8-fwd not
# slower than BF16 (the conservative recipe; ceiling x1.15)). Without torchao it runs BF16 only
# and says so. Budget: three presets x 170 s at most (540 s in all), normally 3-5 minutes.
#
#   benchmarks/gpu.sh [--steps 40] [--batch-size 16] [--seq-len 1024] [--out FILE] [--no-compile]
#
# PYTHON selects the interpreter (default: python3). TORCHAO_WHEELS=DIR installs torchao from
# wheels in DIR beside a preinstalled torch (pip --no-deps --target, torch itself untouched)
# when this python cannot import torchao.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

if ! "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "gpu.sh: $PYTHON has no CUDA-enabled torch that sees a GPU" >&2
    exit 2
fi
. scripts/torchao-wheels.sh
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m trainer info
echo
exec timeout 540 env PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" benchmarks/gpu_bench.py "$@"
