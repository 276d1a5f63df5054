#!/usr/bin/env bash
# The main job, end to end: set up, render, build the default image, run its bundled trainer.
#
# On a fresh machine without a GPU or a container registry (the CPU path):
#   scripts/setup.sh -> isolated podman under .cache/podman -> trainimg render --check ->
#   trainimg base (debootstrap -> podman load) -> trainimg wheelhouse -> trainimg build of
#   project.default_cell, air-gapped from the wheelhouse -> podman run of its trainer.
# On a host where an NVIDIA GPU answers (nvidia-smi -L) AND the GPU cell's base registry answers
# (https://<registry>/v2/), the same script builds the default cu128 cell instead (pulling its
# base; its wheels, fetched once into the wheelhouse, installed without a network; its os stage
# with the engine's network, for dnf from the EL9 and NVIDIA repositories - or from a mirror)
# and runs the trainer on the GPU through CDI.
#
# Environment:
#   TRAINIMG_DEMO_MODE=auto|cpu|gpu  force a path (default auto: detect as above)
#   TRAINIMG_GPU_CELL=<cell>         the cu128 cell of the GPU path (default: the matrix's
#                                    project.default_gpu_cell)
#   TRAINIMG_MIRRORS=<file>          the GPU path's OS and CUDA repositories from a mirror:
#                                    trainimg build --mirrors <file> (docs/build.md, Mirrors)
#   TRAINIMG_PODMAN_ROOT=<dir>       the isolated podman store (default: the host's own podman or
#                                    Docker when one answers, else .cache/podman); set it to an
#                                    empty string to insist on the host's own engine
set -euo pipefail
cd "$(dirname "$0")/.."

GPU_CELL="${TRAINIMG_GPU_CELL:-}"
MODE="${TRAINIMG_DEMO_MODE:-auto}"

say() { printf '\n\033[1m== %s\033[0m\n' "$*" >&2; }

say "setup (podman, debootstrap, .venv)"
scripts/setup.sh --demo
export PATH="$PWD/.venv/bin:$PATH"

# The engine, in discovery's order (docs/build.md): the host's own podman or Docker when one
# answers (CONTAINER_HOST, DOCKER_HOST, a default socket); else this checkout's isolated store
# .cache/podman, made here and found by every later trainimg command in this checkout.
if [ "${TRAINIMG_PODMAN_ROOT-unset}" = unset ] && ! trainimg env >/dev/null 2>&1; then
    export TRAINIMG_PODMAN_ROOT="$PWD/.cache/podman"
fi
engine_env="$(trainimg env)"   # fails here, saying why, when no engine can be found
eval "$engine_env"             # plain podman below then sees the same store as trainimg
cli=podman
if [ -n "${DOCKER_HOST:-}" ] && [ -z "${CONTAINER_HOST:-}${TRAINIMG_PODMAN_ROOT:-}" ]; then
    cli=docker
fi
release() {   # leave nothing of the store mounted (docs/build.md)
    trainimg env --release >&2 || true
    if grep -q " $PWD/" /proc/mounts; then echo "demo: mounts left under $PWD" >&2; fi
}
trap release EXIT

has_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; }
registry_answers() {
    # Any HTTP answer from the registry's /v2/ (401 included) means it is reachable.
    python - "$1" <<'EOF'
import sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(f"https://{sys.argv[1]}/v2/", timeout=5)
except urllib.error.HTTPError:
    pass
except OSError:
    sys.exit(1)
EOF
}
gpu_cell() {
    python -c 'from builder.workspace import open_workspace as o; print(o().matrix.project.default_gpu_cell or "")'
}
gpu_base() {
    python - "$GPU_CELL" <<'EOF'
import sys
from builder.workspace import open_workspace
print(open_workspace().cell(sys.argv[1]).os.base)
EOF
}

[ -n "$GPU_CELL" ] || GPU_CELL="$(gpu_cell)"
if [ "$MODE" = auto ]; then
    MODE=cpu
    if has_gpu; then
        registry="$(gpu_base | cut -d/ -f1)"
        if registry_answers "$registry"; then MODE=gpu; else
            echo "demo: a GPU is here but $registry does not answer: building the CPU cell" >&2
        fi
    fi
fi

say "render --check (the committed Containerfiles match matrix.yaml)"
trainimg render --check

if [ "$MODE" = gpu ]; then
    say "wheelhouse of $GPU_CELL (its whole closure, sha256-locked)"
    trainimg wheelhouse "$GPU_CELL" --dest .cache/wheelhouse
    say "build $GPU_CELL (GPU host with a registry)"
    mirrors=()
    if [ -n "${TRAINIMG_MIRRORS:-}" ]; then mirrors=(--mirrors "$TRAINIMG_MIRRORS"); fi
    image="$(trainimg build "$GPU_CELL" --pull "${mirrors[@]}" --wheelhouse .cache/wheelhouse \
        | awk 'NR==1 {print $1}')"
    run_args=(--device nvidia.com/gpu=all)   # CDI: nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml
else
    say "offline base (debootstrap -> podman load)"
    trainimg base
    say "wheelhouse (/opt/wheels + pip download, sha256-locked)"
    trainimg wheelhouse --dest .cache/wheelhouse
    say "build the default cell, air-gapped"
    image="$(trainimg build --wheelhouse .cache/wheelhouse | awk 'NR==1 {print $1}')"
    run_args=(--network none)
fi
echo "demo: built $image" >&2

say "run the bundled trainer"
"$cli" run --rm "${run_args[@]}" "$image" info
"$cli" run --rm "${run_args[@]}" "$image" \
    train --preset bf16 --model tiny --data synthetic --steps 20 --log-interval 5
trap - EXIT
release
say "done: $image"
cell="${image##*:}"
# The same lines as README.md's "After the demo" (tests/docs/test_readme_tour.py checks it).
cat >&2 <<NEXT
Next, in your own shell (they work as printed):
  cd $(printf '%q' "$PWD")
  . .venv/bin/activate
  eval "\$(trainimg env)"
  $cli run --rm ${run_args[*]} $image train --preset bf16 --model tiny --data synthetic --steps 20
  trainimg verify $cell
  trainimg arches $cell
NEXT
