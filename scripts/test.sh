#!/usr/bin/env bash
# The tests, in two speeds (docs/testing.md). With no option: set up a fresh machine
# (scripts/setup.sh) and run every check CI runs (.ci/run) - lint, types, the rendered
# Containerfiles against the matrix (drift) and the whole test suite. --quick: the unit tests
# only, for the edit-test loop. Extra arguments go to pytest, e.g.
# scripts/test.sh -k render
set -euo pipefail
cd "$(dirname "$0")/.."

# Tests marked engine (podman, dockerd, a registry), integration (torch training, the trainer or
# a CLI as a process, dnf, compilers, downloads) or slow; tests/conftest.py marks a test by the
# fixtures it uses.
QUICK_MARKS="not engine and not integration and not slow"

usage() {
    cat <<EOF
usage: scripts/test.sh [--quick] [PYTEST-ARGS...]

  (no option)  what CI runs (.ci/run): scripts/setup.sh, ruff check, ruff format --check,
               mypy --strict, lint-imports (the import contracts in pyproject.toml),
               trainimg render --check, then every test: unit, integration (torch
               training, the trainer and CLIs as processes, dnf, downloads) and engine
               (the podman store, dockerd, a registry, image builds, the README tour)
  --quick      the unit tests only: pytest -m "$QUICK_MARKS"
               in one process; no setup unless .venv is missing, no lint, types or drift
               check; fewer generated examples (TRAINIMG_TEST_QUICK=1); prints the CPU
               seconds it used: 33.5 on this 2-core machine (docs/testing.md)
  -h, --help   this text

Extra arguments go to pytest, e.g. scripts/test.sh --quick -k render
CI=true (.ci/run sets it): a test that skips for anything but missing hardware (an NVIDIA GPU)
fails the run; the 25 slowest test phases are listed (tests/strict_ci.py)
EOF
}

quick=0
case "${1:-}" in
-h | --help)
    usage
    exit 0
    ;;
--quick)
    quick=1
    shift
    ;;
esac

if ((quick)); then
    if [ ! -x .venv/bin/pytest ]; then
        scripts/setup.sh
    fi
    # Fewer generated examples (tests/quick_mode.py); every other run keeps the full counts.
    export TRAINIMG_TEST_QUICK=1
    # Compiled modules and pytest's rewritten tests are kept under .cache/pycache, even where
    # PYTHONDONTWRITEBYTECODE is set: the checkout gets no __pycache__, and a second run does
    # not compile every module again (a third of a cold run's CPU time).
    unset PYTHONDONTWRITEBYTECODE
    export PYTHONPYCACHEPREFIX="$PWD/.cache/pycache"
    # One process: pytest-xdist repeats the collection (torch and the test modules imported)
    # in every worker - measured slower on 2 cores.
    start=$SECONDS
    status=0
    .venv/bin/pytest -m "$QUICK_MARKS" -q "$@" || status=$?
    # CPU seconds of pytest and every process it waited for (user+sys: what other work on the
    # machine changes least), from this shell's children times in /proc.
    read -ra stat </proc/$$/stat
    tenths=$(((stat[15] + stat[16]) * 10 / $(getconf CLK_TCK)))
    printf 'test: --quick used %d.%d CPU-seconds (user+sys), %d s wall\n' \
        $((tenths / 10)) $((tenths % 10)) $((SECONDS - start))
    exit "$status"
fi

scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/lint-imports --no-cache --no-logo
.venv/bin/trainimg render --check
status=0
.venv/bin/pytest "$@" || status=$?
if ((status == 5)); then # pytest's "no tests collected": nothing ran, so nothing passed
    echo "test: pytest collected no tests (exit 5): check the arguments ($*)" >&2
fi
# Nothing left behind: the test session releases its podman store (tests/conftest.py), so no
# mount under the checkout remains and `rm -rf` of it works.
if grep -q " $PWD/" /proc/mounts; then
    echo "test: mounts left under $PWD:" >&2
    grep " $PWD/" /proc/mounts >&2
    status=1
fi
exit "$status"
