#!/usr/bin/env bash
# Create (once) the side virtualenvs the tabular benchmark (tabular_bench.py) compares against:
#
#   bash benchmarks/setup_side.sh [petastorm|ray ...]        (default: both, in .bench/ of the repository)
#
# * .bench/petastorm: petastorm 0.13.1, which runs only with pyarrow 12, numpy < 2 and pandas 2.2 (newer ones
#   break it), pyspark 3.5 for its Spark converter, and the CPU torch;
# * .bench/ray: Ray Data and the CPU torch.
# torch goes in first, alone, pinned to 2.13.0 (the CPU build; unpinned, pip resolves a multi-GB CUDA build), and
# petastorm without its dependencies (they would pull another torch), then those it needs. A venv that fails to
# install is left out, said so: the benchmark reports the side as skipped ("where it installs"). A finished venv
# is marked with .bench-ready and reused as is; delete the directory to rebuild it.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BASE_PY=${BENCH_BASE_PYTHON:-python3}

install() {
  local name=$1
  shift
  local venv="$ROOT/.bench/$name"
  [[ -f "$venv/.bench-ready" ]] && return 0
  echo "creating $venv (a few minutes)" >&2
  rm -rf "$venv"
  if "$BASE_PY" -m venv "$venv" && "$venv/bin/pip" install -q torch==2.13.0 && "$@" "$venv/bin/pip"; then
    touch "$venv/.bench-ready"
  else
    echo "setup_side.sh: $name did not install; tabular_bench.py skips it" >&2
    rm -rf "$venv"
  fi
}

petastorm() {
  "$1" install -q 'pyarrow==12.0.1' 'numpy<2' 'pandas==2.2.*' 'pyspark==3.5.*' \
    && "$1" install -q --no-deps 'petastorm==0.13.1' \
    && "$1" install -q dill diskcache future fsspec packaging psutil pyzmq six 'setuptools<70'
}

ray() {
  "$1" install -q 'ray[data]' pydantic
}

for side in "${@:-petastorm ray}"; do
  for name in $side; do
    install "$name" "$name"
  done
done
