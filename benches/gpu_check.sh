#!/usr/bin/env bash
# The GPU check, run from the repository root on a machine with a CUDA device and
# the wheel carried in as dist/gpu_tok-*.whl (no Rust, no network needed):
#   installs the wheel, prints gpu_tok.info() and which tokenizers the tests cover,
#   runs the `gpu` tests (every failure shown, up to 20), compute-sanitizer's
#   memcheck and racecheck over a small test when the tool is there, then the GPU
#   benchmark. Everything is also written to "$OUT/gpu_check.log" (OUT defaults to
#   /tmp), the benchmark's JSON to "$OUT/gpu_bench.json". The benchmark runs even
#   when the tests fail; the exit status is the tests' (non-zero when they or a
#   sanitizer failed). Each step is bounded so that the whole fits 10 minutes.
#
#   make wheel wheelhouse               # where Rust is: the abi3 wheel, and the test tools'
#                                       # wheels for an offline CPython 3.12, into dist/
#   OUT=/some/dir bash benches/gpu_check.sh   # on the GPU machine
#
# --dry-run (CI, tests/test_gpu_check.py): every step that needs no device runs;
# the installed gpu_tok is used (nothing is installed); each device step checks
# its command instead (the tests it would run are collected, the benchmark's
# arguments parsed) and reports "skipped: no device". Without a usable CUDA
# device the script behaves so too, and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp}"
mkdir -p "$OUT"
LOG="$OUT/gpu_check.log"
export PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# Plugins other packages install (and which may not import) stay out of pytest.
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
DRY_RUN=0
[[ "${1:-}" == "--dry-run" ]] && DRY_RUN=1
if [[ -z "${PYTHON:-}" ]]; then
  PYTHON=python3
  command -v python3 >/dev/null || PYTHON=python
fi
# Seconds per step: tests, each sanitizer, benchmark (10 minutes a command in all).
TESTS_S=220 SANITIZER_S=75 BENCH_S=150
# The small test the sanitizers run: a few batches, and the long words a block merges.
SANITIZED='small_and_empty or (long_words_merged_by_a_block and qwen3)'

check() {
  local wheel tests=0 bench=0 sanitizers=0 start=$SECONDS device=1 collected
  echo "== gpu_check $(date -u +%FT%TZ) in $PWD$([[ $DRY_RUN == 1 ]] && echo ' (dry run)')"
  command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "(no nvidia-smi)"
  "$PYTHON" -c 'import sys; print("python", sys.version.split()[0], sys.executable)'
  "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())' \
    || echo "(torch not importable)"

  if [[ $DRY_RUN == 1 ]]; then
    echo "== install: skipped (dry run: the installed gpu_tok is used)"
  else
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
    # Wheels missing here come from dist/wheelhouse (`make wheelhouse`), never the network.
    if [[ -d dist/wheelhouse ]]; then
      for package in pytest tokenizers pyarrow; do
        "$PYTHON" -c "import $package" 2>/dev/null && continue
        "$PYTHON" -m pip install -q --no-index --find-links dist/wheelhouse "$package" 2>/dev/null \
          || "$PYTHON" -m pip install -q --no-index --find-links dist/wheelhouse --break-system-packages "$package" \
          || echo "($package is not in dist/wheelhouse)"
      done
    fi
  fi

  # Preflight, before any device time: what the tests and the benchmark import.
  echo "== preflight"
  "$PYTHON" - <<'PY' || { echo "FAIL: preflight (a module the tests need is missing)"; return 4; }
import importlib
missing = []
for name in ("pytest", "numpy", "tokenizers", "torch", "cupy", "pyarrow", "gpu_tok"):
    try:
        module = importlib.import_module(name)
        print(f"  {name} {getattr(module, '__version__', '?')}")
    except ImportError as err:
        missing.append(name)
        print(f"  {name}: MISSING ({err})")
# torch, cupy and pyarrow only narrow what is measured; the rest is needed
raise SystemExit(1 if {"pytest", "numpy", "tokenizers", "gpu_tok"} & set(missing) else 0)
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
  echo "== tokenizers the tests cover"
  PYTHONPATH="tests${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" - <<'PY' || echo "FAIL: tests/conftest.py does not import"
import conftest as c
every = list(dict.fromkeys(c.SHARED_NAMES + c.FIXTURE_NAMES + c.FIXTURE_ONLY))
print(f"  covered: {' '.join(c.TOKENIZER_NAMES)}"
      f" ({'../shared' if c.HAVE_SHARED else 'committed fixtures only'}: {c.SHARED})")
missing = [name for name in every if name not in c.TOKENIZER_NAMES]
print(f"  not covered: {' '.join(missing) if missing else 'none'}"
      + ("" if c.HAVE_SHARED else " (no tokenizers folder at GPU_TOK_SHARED: copy ../shared beside the repository)"))
PY

  if [[ $DRY_RUN == 1 ]] || ! "$PYTHON" -c 'import gpu_tok; raise SystemExit(not gpu_tok.info()["cuda"]["available"])' \
       2>/dev/null; then
    device=0
    [[ $DRY_RUN == 1 ]] || echo "(no usable CUDA device: the device steps only check their commands)"
  fi

  echo "== tests (pytest -m gpu tests/test_gpu.py)"
  if [[ $device == 1 ]]; then
    # a CUDA device that cannot be used must fail here, not skip the module
    GPU_TOK_REQUIRE_CUDA=1 timeout "$TESTS_S" "$PYTHON" -m pytest -m gpu tests/test_gpu.py --maxfail=20 -q \
      -p no:cacheprovider --durations=10 || tests=$?
    echo "tests: exit $tests ($((SECONDS - start)) s so far)"
  else
    collected="$(GPU_TOK_COLLECT_ONLY=1 "$PYTHON" -m pytest -m gpu tests/test_gpu.py --collect-only -q \
      -p no:cacheprovider 2>&1 \
      | grep -c '::' || true)"
    [[ "$collected" -gt 0 ]] || { echo "FAIL: no gpu test collected from tests/test_gpu.py"; return 5; }
    echo "tests: skipped: no device ($collected tests collected)"
  fi

  echo "== compute-sanitizer (memcheck, racecheck) over: $SANITIZED"
  local sanitizer
  sanitizer="$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)"
  collected="$(GPU_TOK_COLLECT_ONLY=1 "$PYTHON" -m pytest -m gpu tests/test_gpu.py -k "$SANITIZED" --collect-only \
    -q -p no:cacheprovider 2>&1 | grep -c '::' || true)"
  [[ "$collected" -gt 0 ]] || { echo "FAIL: -k '$SANITIZED' selects no test"; return 5; }
  if [[ -z "$sanitizer" ]]; then
    echo "sanitizers: not run: compute-sanitizer is not on this machine (PATH, /usr/local/cuda/bin;" \
      "$collected tests selected)"
  elif [[ $device == 0 ]]; then
    echo "sanitizers: skipped: no device ($sanitizer found; $collected tests selected)"
  else
    for tool in memcheck racecheck; do
      local rc=0
      GPU_TOK_REQUIRE_CUDA=1 timeout "$SANITIZER_S" "$sanitizer" --tool "$tool" --error-exitcode 86 \
        "$PYTHON" -m pytest -m gpu tests/test_gpu.py -k "$SANITIZED" -q -p no:cacheprovider || rc=$?
      case $rc in
        0) echo "$tool: clean ($collected tests)" ;;
        86) echo "$tool: ERRORS (above)"; sanitizers=1 ;;
        124) echo "$tool: timed out after ${SANITIZER_S} s (not a finding)" ;;
        *) echo "$tool: the tests failed under it (exit $rc)"; sanitizers=1 ;;
      esac
    done
  fi

  echo "== benchmark (benches/gpu_bench.py)"
  if [[ $device == 1 ]]; then
    timeout "$BENCH_S" "$PYTHON" benches/gpu_bench.py --json "$OUT/gpu_bench.json" --time-limit $((BENCH_S - 30)) \
      || bench=$?
    echo "bench: exit $bench"
  else
    "$PYTHON" benches/gpu_bench.py --help >/dev/null || { echo "FAIL: benches/gpu_bench.py --help"; return 6; }
    echo "bench: skipped: no device (its arguments parse)"
  fi

  echo "== summary: tests exit $tests, sanitizers $sanitizers, bench exit $bench, $((SECONDS - start)) s; log $LOG"
  [[ $tests == 0 ]] || return "$tests"
  return "$sanitizers"
}

# check() handles its own failures (errexit does not hold inside a pipeline's
# subshell once it is switched off here); its status, not tee's, is the exit status.
set +e
check 2>&1 | tee "$LOG"
status="${PIPESTATUS[0]}"
exit "$status"
