#!/usr/bin/env bash
# Build the Debian 12 cu128 cell air-gapped and verify it, on a machine without a GPU:
#   scripts/setup.sh -> isolated podman under .cache/podman -> trainimg base (debootstrap ->
#   podman import) -> trainimg wheelhouse (torch 2.9.1 from PyPI is the cu128 build: its whole
#   closure, ~3.9 GB with the 15 nvidia-*-cu12 wheels and triton, sha256-locked) -> trainimg
#   build (no network) -> trainimg verify (sm_100 by scanning the image's CUDA libraries with the
#   fatbin reader, BF16/FP8 and torch.compile steps on the CPU, nvidia-smi skipped with its
#   reason) -> trainimg arches --gpu b200 (every CUDA library, its kernel modules and verdict).
# Prints the time of each stage. TRAINIMG_PODMAN_ROOT and TRAINIMG_WHEELHOUSE as in demo.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
CELL=debian12-cu128-py3.11-torch2.9.1-runtime
WHEELHOUSE="${TRAINIMG_WHEELHOUSE:-.cache/wheelhouse-cu128}"

say() { printf '\n\033[1m== %s\033[0m\n' "$*" >&2; }
timed() {
    local start=$SECONDS
    "$@"
    echo "cu128: $(( SECONDS - start )) s for: $*" >&2
}

say "setup (podman, debootstrap, .venv)"
scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
export TRAINIMG_PODMAN_ROOT="${TRAINIMG_PODMAN_ROOT:-$PWD/.cache/podman}"
mkdir -p "$TRAINIMG_PODMAN_ROOT"
python -c 'from builder.engines.local_podman import from_environment; from_environment()'
export CONTAINERS_CONF="$TRAINIMG_PODMAN_ROOT/containers.conf"
export CONTAINERS_STORAGE_CONF="$TRAINIMG_PODMAN_ROOT/storage.conf"

say "offline base"
timed trainimg base
say "wheelhouse of $CELL (download once; later runs find it complete)"
timed trainimg wheelhouse "$CELL" --dest "$WHEELHOUSE"
say "build $CELL, air-gapped"
timed trainimg build "$CELL" --wheelhouse "$WHEELHOUSE"
say "verify $CELL"
timed trainimg verify "$CELL"
say "arches of $CELL on a B200"
timed trainimg arches "$CELL" --gpu b200
