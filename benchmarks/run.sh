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

# `remote-s3` is not a bench.py scenario: it selects step 4 and is taken out of what bench.py sees.
ONLY_WORDS=" ${BENCH_ONLY:-} "
REMOTE_S3=0
if [[ -z "${BENCH_ONLY:-}" || "$ONLY_WORDS" == *" remote-s3 "* ]]; then REMOTE_S3=1; fi
export BENCH_ONLY="$(echo "${ONLY_WORDS// remote-s3 / }" | xargs)"
if [[ -n "$BENCH_ONLY" || "$ONLY_WORDS" != *" remote-s3 "* ]]; then
  "$DRIVER_PY" "$HERE/bench.py" "$@"
fi
if [[ "$REMOTE_S3" == 1 ]]; then
  # It needs the project's test dependencies (pytest, boto3, the SeaweedFS binary): the "ours" interpreter.
  BENCH_ONLY=reads BENCH_ROUNDS="${BENCH_ROUNDS:-2}" "${BENCH_OURS_PYTHON:-$ROOT/.venv/bin/python}" "$HERE/remote_bench.py"
fi
