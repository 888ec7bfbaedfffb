#!/usr/bin/env bash
# Entry point of `make bench`: ours vs MosaicML Streaming, side by side.
#
#   bash benchmarks/run.sh [bench.py flags]      e.g. BENCH_SCALE=0.3 BENCH_ONLY=formats bash benchmarks/run.sh
#
# 1. Creates the reference venv .bench/ref once (setup_ref.sh), unless BENCH_REF_PYTHON is given.
# 2. Re-executes itself in a private mount namespace with an empty /dev/shm when it can (root +
#    unshare): StreamingDataset keeps state in named shared memory, and the reference's stale-memory
#    cleanup unlinks other processes' live segments, so benchmarks and other users of the machine
#    must not see each other's. TMPDIR (where the reference leaves its lock files) is private too.
# 3. Runs benchmarks/bench.py with the project's .venv python (see bench.py for the BENCH_* knobs).
# 4. Then the S3 epochs of benchmarks/remote_bench.py (cold epochs vs bare boto3 on a loopback SeaweedFS, 1/2/4
#    workers, eviction) at the same BENCH_SCALE, when BENCH_ONLY is unset or names `remote-s3`.
# 5. Then benchmarks/tabular_bench.py (a Spark table of BENCH_SCALE x 1M rows of 100 float32 features into
#    training: ours, petastorm, Ray Data, the reference, numpy's gather as the bar; side venvs by setup_side.sh)
#    when BENCH_ONLY is unset or names `tabular`, and benchmarks/loader_handover.py (tokens, batch 32, 2 workers:
#    ours against today's StreamingDataLoader, the reference and numpy's gather) when it is unset or names `loader`.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)

if [[ -z "${BENCH_IN_NAMESPACE:-}" ]]; then
  if [[ -z "${BENCH_REF_PYTHON:-}" ]]; then
    bash "$HERE/setup_ref.sh" "$ROOT/.bench/ref"
  fi
  if [[ -z "${BENCH_NO_UNSHARE:-}" ]] && command -v unshare > /dev/null \
     && unshare --mount --propagation private true 2> /dev/null; then
    export BENCH_IN_NAMESPACE=1
    exec unshare --mount --propagation private bash -c \
      'mount -t tmpfs -o size=8g,mode=1777 bench-shm /dev/shm && exec bash "$0" "$@"' \
      "${BASH_SOURCE[0]}" "$@"
  fi
  echo "run.sh: /dev/shm is shared with the rest of the machine (no private namespace)" >&2
fi

RUN_TMP="$ROOT/.bench/tmp/run-$$"
mkdir -p "$RUN_TMP"
trap 'rm -rf "$RUN_TMP"' EXIT
export TMPDIR="$RUN_TMP"

DRIVER_PY="$ROOT/.venv/bin/python"
[[ -x "$DRIVER_PY" ]] || DRIVER_PY=python3

# `remote-s3`, `tabular` and `loader` are not bench.py scenarios: they select steps 4 and 5 and are taken out of
# what bench.py sees.
ONLY_WORDS=" ${BENCH_ONLY:-} "
wanted() { [[ -z "${BENCH_ONLY:-}" || "$ONLY_WORDS" == *" $1 "* ]]; }
REMOTE_S3=0; TABULAR=0; LOADER=0
wanted remote-s3 && REMOTE_S3=1
wanted tabular && TABULAR=1
wanted loader && LOADER=1
REST="$ONLY_WORDS"
for word in remote-s3 tabular loader; do REST="${REST// $word / }"; done
export BENCH_ONLY="$(echo "$REST" | xargs)"
if [[ -z "${ONLY_WORDS// /}" || -n "$BENCH_ONLY" ]]; then
  "$DRIVER_PY" "$HERE/bench.py" "$@"
fi
if [[ "$REMOTE_S3" == 1 ]]; then
  # It needs the project's test dependencies (pytest, boto3, the SeaweedFS binary): the "ours" interpreter.
  BENCH_ONLY=reads BENCH_ROUNDS="${BENCH_ROUNDS:-2}" "${BENCH_OURS_PYTHON:-$ROOT/.venv/bin/python}" "$HERE/remote_bench.py"
fi
SCALE=${BENCH_SCALE:-1}
OURS_PY=${BENCH_OURS_PYTHON:-$ROOT/.venv/bin/python}
if [[ "$TABULAR" == 1 ]]; then
  bash "$HERE/setup_side.sh"
  ROWS=$("$OURS_PY" -c "print(max(20000, int(1_000_000 * $SCALE)))")
  SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON="$OURS_PY" "$OURS_PY" "$HERE/tabular_bench.py" --rows "$ROWS" \
    --rounds "${BENCH_ROUNDS:-2}" --reference-python "${BENCH_REF_PYTHON:-$ROOT/.venv-ref/bin/python}"
fi
if [[ "$LOADER" == 1 ]]; then
  SAMPLES=$("$OURS_PY" -c "print(max(2000, int(20_000 * $SCALE)))")
  "$OURS_PY" "$HERE/loader_handover.py" --samples "$SAMPLES" --rounds "${BENCH_ROUNDS:-3}" \
    --reference-python "${BENCH_REF_PYTHON:-$ROOT/.venv-ref/bin/python}"
fi
