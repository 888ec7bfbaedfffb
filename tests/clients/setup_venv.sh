#!/usr/bin/env bash
# Build (once) the virtualenvs of the real-clients lane: llm-foundry and composer beside one streaming package.
#
#   bash tests/clients/setup_venv.sh base VENV_DIR            the clients alone (never run by itself)
#   bash tests/clients/setup_venv.sh ours|ref VENV_DIR BASE   a copy of BASE plus one streaming package
#
# `base` installs the clients from PyPI: the dependencies in requirements.txt (exact versions in constraints.txt),
# then llm-foundry, mosaicml (composer) and torchvision with --no-deps, since the first two pin torch<2.7.1 and pip
# would otherwise replace torch 2.13.0 (or fail). torchvision is the release built for torch 2.13.0;
# benchmarks/patch_torchvision.py lets it import beside a CPU-only torch where one is installed (composer and the
# reference import it).
# Each side then starts as a hard-linked copy of the base (seconds, no second download or unpacking of torch) and
# gets its own package (with TORCH_FROM=VENV, the base itself first takes that virtualenv's torch as hard links,
# benchmarks/share_torch.py): `ours` this checkout (editable, so the lane always runs the current source), `ref`
# streaming-community 0.14.2, each with its own dependencies. pip replaces files rather than writing into them, so
# the copies never change each other or the base. A finished venv is marked with .installed and reused as is.
set -euo pipefail

KIND=$1
VENV=$(realpath -m "$2")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CLIENTS=('llm-foundry==0.22.0' 'mosaicml==0.32.1' 'torchvision==0.28.0')
case "$KIND" in
  base) ;;
  ours) PACKAGE=(-e "$ROOT") ;;
  ref) PACKAGE=('streaming-community==0.14.2') ;;
  *) echo "usage: $0 base VENV_DIR | $0 ours|ref VENV_DIR BASE_VENV_DIR" >&2; exit 2 ;;
esac

rm -rf "$VENV"
LOG=$(dirname "$VENV")/$(basename "$VENV")-pip-install.log
# No bytecode up front: the interpreter compiles what it imports (a fraction of torch, transformers and oci).
PIP=("$VENV/bin/python" -m pip install --quiet --no-compile -c "$HERE/constraints.txt")
if [[ "$KIND" == base ]]; then
  python3 -m venv "$VENV"
  if [[ -n "${TORCH_FROM:-}" ]]; then
    python3 "$ROOT/benchmarks/share_torch.py" "$TORCH_FROM" "$VENV"
  fi
  {
    "${PIP[@]}" -r "$HERE/requirements.txt" 'torchvision==0.28.0'
    "${PIP[@]}" --no-deps "${CLIENTS[@]}"
  } > "$LOG" 2>&1 || { tail -n 30 "$LOG" >&2; exit 1; }
  "$VENV/bin/python" "$ROOT/benchmarks/patch_torchvision.py"
else
  BASE=$(realpath "$3")
  [[ -f "$BASE/.installed" ]] || { echo "no finished base venv at $BASE" >&2; exit 1; }
  cp -al "$BASE" "$VENV"
  rm -f "$VENV/.installed"
  # The copy's console scripts still name the base's interpreter: rewrite their first line (pip writes anew).
  { grep -lZ "^#!$BASE/bin/python" "$VENV"/bin/* 2>/dev/null || true; } | xargs -0 -r sed -i "1s|^#!$BASE/|#!$VENV/|"
  "${PIP[@]}" "${PACKAGE[@]}" 'torch==2.13.0' 'torchvision==0.28.0' > "$LOG" 2>&1 || { tail -n 30 "$LOG" >&2; exit 1; }
fi
# Run from the venv, not the checkout: on the reference side the checkout's own `streaming` must not be imported.
if [[ "$KIND" == base ]]; then
  CHECK='import composer, torch, transformers; print("base: composer", composer.__version__, "torch", torch.__version__)'
else
  CHECK='import llmfoundry, composer, streaming; print("'"$KIND"':", "llm-foundry", llmfoundry.__version__, "composer", composer.__version__, "streaming", streaming.__version__, streaming.__file__)'
fi
(cd "$VENV" && "$VENV/bin/python" -P -c "$CHECK")
touch "$VENV/.installed"
