#!/usr/bin/env bash
# Device check of issue #7, as one prepared command (< 5 minutes on one GPU):
#   BT + 2PL refit at 1,000 and 10,000 queries (cold and warm) and NUTS at 1,000 queries.
# Usage: bash benchmarks/gpu_scale.sh [--tiny]    (--tiny: CPU dry run at toy sizes)
# Needs the project's venv with a CUDA jaxlib on the device machine (pip install -e ".[dev]" "jax[cuda12]").
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
if [ "${1:-}" = "--tiny" ]; then
  export JAX_PLATFORMS=cpu
else
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
fi
nproc
timeout 290 "$PY" -m benchmarks.gpu_scale "$@"
