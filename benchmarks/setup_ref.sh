#!/usr/bin/env bash
# Create (once) the reference virtualenv that benchmarks compare against: MosaicML Streaming as
# published on PyPI by the streaming-community fork.
#
#   bash benchmarks/setup_ref.sh [VENV_DIR]        (default: .bench/ref in the repository)
#
# torch is pinned to 2.13.0 in the same pip call, the release the other virtualenvs hold. With
# BENCH_TORCH_FROM=VENV, that virtualenv's torch is hard-linked in first (share_torch.py: PyPI's torch
# is the CUDA build on Linux, 4.6 GB unpacked) and pip keeps it. torchvision is patched to import
# beside a CPU-only torch where one is installed (patch_torchvision.py; beside the CUDA build its ops
# load and the patch changes nothing). pyspark/pyarrow/pandas are added for the spark scenario unless
# BENCH_REF_SPARK=0. A finished venv is marked with .bench-ready (and .bench-spark) and reused as is;
# delete the directory to rebuild it.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
VENV=${1:-$ROOT/.bench/ref}
READY="$VENV/.bench-ready"
PACKAGES=('streaming-community==0.14.2' 'torch==2.13.0' numpy pillow)
SPARK_PACKAGES=('torch==2.13.0' 'pyspark==4.3.0' pyarrow pandas)

WANT_SPARK=${BENCH_REF_SPARK:-1}
if [[ -f "$READY" && ( "$WANT_SPARK" == 0 || -f "$VENV/.bench-spark" ) ]]; then
  exit 0
fi

BASE_PY=${BENCH_BASE_PYTHON:-python3}
mkdir -p "$(dirname "$VENV")"
if [[ ! -x "$VENV/bin/python" ]]; then
  echo "creating reference venv $VENV with $("$BASE_PY" --version 2>&1)" >&2
  "$BASE_PY" -m venv "$VENV"
  if [[ -n "${BENCH_TORCH_FROM:-}" ]]; then
    "$BASE_PY" "$HERE/share_torch.py" "$BENCH_TORCH_FROM" "$VENV" >&2
  fi
fi
LOG="$VENV/pip-install.log"
if [[ ! -f "$READY" ]]; then
  echo "installing ${PACKAGES[*]} (a few minutes; log: $LOG)" >&2
  "$VENV/bin/python" -m pip install --quiet "${PACKAGES[@]}" > "$LOG" 2>&1 || {
    tail -n 20 "$LOG" >&2
    exit 1
  }
  "$VENV/bin/python" "$HERE/patch_torchvision.py"
  "$VENV/bin/python" -I -c \
    'import streaming; print("reference streaming", streaming.__version__, streaming.__file__)'
  touch "$READY"
fi
if [[ "$WANT_SPARK" != 0 && ! -f "$VENV/.bench-spark" ]]; then
  echo "installing ${SPARK_PACKAGES[*]} into $VENV" >&2
  "$VENV/bin/python" -m pip install --quiet "${SPARK_PACKAGES[@]}" >> "$LOG" 2>&1 || {
    tail -n 20 "$LOG" >&2
    exit 1
  }
  touch "$VENV/.bench-spark"
fi
