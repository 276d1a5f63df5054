#!/usr/bin/env bash
# Set up a fresh machine (scripts/setup.sh) and run every check CI runs: lint, types, the
# rendered Containerfiles against the matrix (drift), and the test suite. Extra arguments go
# to pytest, e.g. scripts/test.sh -k render
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/trainimg render --check
status=0
.venv/bin/pytest "$@" || status=$?
# Nothing left behind: the test session releases its podman store (tests/conftest.py), so no
# mount under the checkout remains and `rm -rf` of it works.
if grep -q " $PWD/" /proc/mounts; then
    echo "test: mounts left under $PWD:" >&2
    grep " $PWD/" /proc/mounts >&2
    status=1
fi
exit "$status"
