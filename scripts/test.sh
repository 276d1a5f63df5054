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
.venv/bin/pytest "$@"
