#!/usr/bin/env bash
# The GPU check, run from the repository root on a machine with a CUDA device and
# the wheel carried in as dist/gpu_tok-*.whl (no Rust, no network needed):
#   installs the wheel, prints gpu_tok.info(), runs the `gpu` tests, then the GPU
#   benchmark. Everything is also written to "$OUT/gpu_check.log" (OUT defaults to
#   /tmp), the benchmark's JSON to "$OUT/gpu_bench.json". The benchmark runs even
#   when the tests fail; the exit status is the tests' (non-zero when they failed).
#
#   make wheel wheelhouse               # where Rust is: the abi3 wheel, and the test tools'
#                                       # wheels for an offline CPython 3.12, into dist/
#   OUT=/some/dir bash benches/gpu_check.sh   # on the GPU machine
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp}"
mkdir -p "$OUT"
LOG="$OUT/gpu_check.log"
export PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
PYTHON="${PYTHON:-python}"

check() {
  local wheel tests=0 bench=0 start=$SECONDS
  echo "== gpu_check $(date -u +%FT%TZ) in $PWD"
  command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "(no nvidia-smi)"
  "$PYTHON" -c 'import sys; print("python", sys.version.split()[0])'
  "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())' \
    || echo "(torch not importable)"

  # the newest wheel under dist/
  wheel="$(ls -t dist/gpu_tok-*.whl 2>/dev/null | head -n 1 || true)"
  if [[ -z "$wheel" ]]; then
    echo "FAIL: no dist/gpu_tok-*.whl to install"
    return 2
  fi
  echo "== installing $wheel"
  if ! "$PYTHON" -m pip install -q --no-deps --no-index --force-reinstall "$wheel"; then
    echo "(retrying with --break-system-packages)"
    "$PYTHON" -m pip install -q --no-deps --no-index --force-reinstall --break-system-packages "$wheel" || {
      echo "FAIL: could not install $wheel"
      return 3
    }
  fi

  # Preflight, before any device time: what the tests and the benchmark import.
  # Wheels missing here come from dist/wheelhouse (`make wheelhouse`), never the network.
  if [[ -d dist/wheelhouse ]]; then
    for package in pytest tokenizers pyarrow; do
      "$PYTHON" -c "import $package" 2>/dev/null && continue
      "$PYTHON" -m pip install -q --no-index --find-links dist/wheelhouse "$package" 2>/dev/null \
        || "$PYTHON" -m pip install -q --no-index --find-links dist/wheelhouse --break-system-packages "$package" \
        || echo "($package is not in dist/wheelhouse)"
    done
  fi
  echo "== preflight"
  "$PYTHON" - <<'PY' || { echo "FAIL: preflight (a module the tests need is missing)"; return 4; }
import importlib
missing = []
for name in ("pytest", "numpy", "tokenizers", "torch", "cupy", "pyarrow"):
    try:
        module = importlib.import_module(name)
        print(f"  {name} {getattr(module, '__version__', '?')}")
    except ImportError as err:
        missing.append(name)
        print(f"  {name}: MISSING ({err})")
# torch, cupy and pyarrow only narrow what is measured; the rest is needed
raise SystemExit(1 if {"pytest", "numpy", "tokenizers"} & set(missing) else 0)
PY

  echo "== gpu_tok.info()"
  "$PYTHON" -c 'import gpu_tok, json; print(json.dumps(gpu_tok.info(), indent=1, default=str))' \
    || echo "FAIL: gpu_tok.info() raised (the tests will say more)"

  # the shared tokenizers and corpus: ../shared (conftest's default) or ./shared
  if [[ -z "${GPU_TOK_SHARED:-}" && ! -f ../shared/tokenizers/qwen3/tokenizer.json \
        && -f shared/tokenizers/qwen3/tokenizer.json ]]; then
    export GPU_TOK_SHARED="$PWD/shared"
  fi
  echo "GPU_TOK_SHARED=${GPU_TOK_SHARED:-<unset: ../shared if present, else fixtures and the embedded corpus>}"

  echo "== tests (pytest -m gpu tests/test_gpu.py)"
  # a CUDA device that cannot be used must fail here, not skip the module
  GPU_TOK_REQUIRE_CUDA=1 timeout 240 "$PYTHON" -m pytest -m gpu tests/test_gpu.py -x -q -p no:cacheprovider \
    --durations=10 || tests=$?
  echo "tests: exit $tests ($((SECONDS - start)) s so far)"

  echo "== benchmark (benches/gpu_bench.py)"
  timeout 200 "$PYTHON" benches/gpu_bench.py --json "$OUT/gpu_bench.json" || bench=$?
  echo "bench: exit $bench"

  echo "== summary: tests exit $tests, bench exit $bench, $((SECONDS - start)) s; log $LOG"
  return "$tests"
}

# check() handles its own failures (errexit does not hold inside a pipeline's
# subshell once it is switched off here); its status, not tee's, is the exit status.
set +e
check 2>&1 | tee "$LOG"
status="${PIPESTATUS[0]}"
exit "$status"
