# Sourced by benchmarks/gpu.sh and scripts/gpu-verify.sh: when $PYTHON cannot import torchao and
# TORCHAO_WHEELS names a directory of wheels, install torchao there with --no-deps into its own
# target directory and put that on PYTHONPATH, so a preinstalled CUDA torch is left as it is
# (pip would otherwise try to "upgrade" torch to satisfy torchao's metadata).
if [ -n "${TORCHAO_WHEELS:-}" ] && ! "$PYTHON" -c 'import torchao' >/dev/null 2>&1; then
    TORCHAO_TARGET=${TORCHAO_TARGET:-${TMPDIR:-/tmp}/trainimg-torchao}
    echo "installing torchao from $TORCHAO_WHEELS into $TORCHAO_TARGET (torch untouched)" >&2
    "$PYTHON" -m pip install -q --disable-pip-version-check --no-deps --no-index \
        --find-links "$TORCHAO_WHEELS" --target "$TORCHAO_TARGET" torchao
    export PYTHONPATH="$TORCHAO_TARGET${PYTHONPATH:+:$PYTHONPATH}"
fi
