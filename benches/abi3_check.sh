#!/usr/bin/env bash
# The stable-ABI flavour (cargo feature abi3: the one wheel for every CPython
# >= 3.11, whose list-of-str route is CPython's UTF-8 under the GIL) is not
# what `make install` builds (a per-version core, whose route is the pool's):
# CI tests the latter. This builds the abi3 core apart (a wheel in target/abi3;
# a release build: minutes) and runs the input tests on it; with --host-cost it also
# times both flavours' host cost side by side (benches/host_cost.py).
#
#   benches/abi3_check.sh [--host-cost] [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if command -v maturin >/dev/null; then MATURIN=(maturin); else MATURIN=("$PYTHON" -m maturin); fi
host_cost=0
if [[ "${1:-}" == "--host-cost" ]]; then host_cost=1; shift; fi
out=target/abi3
rm -rf "$out/wheel" "$out/site"
"${MATURIN[@]}" build --release --features abi3 --out "$out/wheel"
"$PYTHON" -m zipfile -e "$out"/wheel/gpu_tok-*-abi3-*.whl "$out/site"
PYTHONPATH="$out/site" "$PYTHON" -c 'import gpu_tok; assert gpu_tok.info(probe_cuda=False)["stable_abi"], gpu_tok.__file__'
PYTHONPATH="$out/site" "$PYTHON" -m pytest -q -p no:cacheprovider \
  tests/test_str_inputs.py tests/test_bad_input.py tests/test_api.py tests/test_arrow.py "$@"
if [[ "$host_cost" == 1 ]]; then
  shared="${GPU_TOK_SHARED:-../shared}"
  for round in 1 2; do
    for flavour in abi3 per-version; do
      site=""; [[ "$flavour" == abi3 ]] && site="$out/site"
      echo "== $flavour, round $round"
      PYTHONPATH="$site" "$PYTHON" benches/host_cost.py --shared "$shared" --json "$out/host_cost-$flavour-$round.json"
    done
  done
fi
