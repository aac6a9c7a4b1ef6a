#!/usr/bin/env bash
# Device check of issues #7 and #33, as one prepared command (< 8 minutes on one GPU), two processes:
#   1. BT + 2PL refit at 1,000 and 10,000 queries (cold and warm) and NUTS at 1,000 queries (at most 180 s);
#   2. the default posterior (fit_posterior method="auto": the block Laplace) at 1,000 queries x 150 documents,
#      cold and warm, peak device memory, coverage against the simulator's truth (at most 280 s).
# A process cut off by its limit is reported and the next one still runs; each writes benchmarks/out/*.json.
# Usage: bash benchmarks/gpu_scale.sh [--tiny]    (--tiny: CPU dry run at toy sizes, < 2 minutes)
# Needs the project's venv with a CUDA jaxlib on the device machine (pip install -e ".[dev]" "jax[cuda12]").
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
if [ "${1:-}" = "--tiny" ]; then
  export JAX_PLATFORMS=cpu
else
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
fi
nproc
status=0
timeout 180 "$PY" -m benchmarks.gpu_scale "$@" || { rc=$?; echo "refits and NUTS: exit $rc (124: the 180 s limit)"; status=$rc; }
timeout 280 "$PY" -m benchmarks.gpu_scale --posterior --posterior-budget 230 "$@" \
  || { rc=$?; echo "posterior: exit $rc (124: the 280 s limit; benchmarks/out/gpu_posterior.json keeps what was measured)"; status=$rc; }
exit $status
