# The targets people and CI run alike (.ci/run calls `make test`).
PYTHON ?= python3

.PHONY: install test lint rust-test pytest pytest-fresh-clone bench fmt kernels wheel wheel-per-version wheelhouse

install:  ## build the extension (release, with the tests' hooks: the test-hooks feature) and install it, editable, with the test tools
	@echo "make install: building gpu_tok's Rust core (release; a few minutes on 2 cores the first time)"
	@echo "  and installing gpu_tok in editable mode with the test tools (this replaces a 'pip install .')"
	MATURIN_PEP517_ARGS="--features test-hooks" $(PYTHON) -m pip install -e ".[test]" --progress-bar off

lint:  ## formatting, clippy, ruff, mypy, stubs against the built module
	cargo fmt --all -- --check
	cargo clippy --all-targets --release --features test-hooks -- -D warnings
	cargo clippy --release --features abi3 -- -D warnings  # the stable-ABI flavour (make wheel) compiles clean too
	$(PYTHON) -m ruff check python tests benches
	$(PYTHON) -m mypy python/gpu_tok
	$(PYTHON) -m mypy.stubtest gpu_tok._core

rust-test:
	cargo test --release

# pytest-xdist: one worker per core, each taking whole test files (module caches and
# fixtures stay in one process). PYTEST_ARGS adds options, e.g. --shared-dependent.
PYTEST_WORKERS ?= auto
PYTEST_ARGS ?=

pytest:
	$(PYTHON) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --durations=15 $(PYTEST_ARGS)

pytest-fresh-clone:  ## the test files whose inputs change without ../shared, with it hidden (what a fresh clone runs)
	GPU_TOK_SHARED=/nonexistent $(MAKE) pytest PYTEST_ARGS="--shared-dependent $(PYTEST_ARGS)"

test: install lint rust-test pytest  ## everything CI checks

bench:  ## fresh-text benchmark on the shared corpus (12 MB, batch and 1 thread), results under benches/results/
	$(PYTHON) benches/run_bench.py

# The SMs wheels carry prebuilt kernels for (others compile them with NVRTC at first use).
KERNEL_ARCHS ?= sm_80 sm_86 sm_89 sm_90 sm_100 sm_120
KERNEL_CORE := target/kernel-core
# The NVRTC that builds them: the oldest of the CUDA major the core needs, since
# a driver refuses CUBINs of an NVRTC newer than itself (a 13.0 driver loads 13.0's).
KERNEL_NVRTC ?= 13.0
KERNEL_NVRTC_DIR := target/kernel-nvrtc-$(KERNEL_NVRTC)

kernels:  ## prebuilt CUBINs for KERNEL_ARCHS into python/gpu_tok/kernels/ (git-ignored), by a core built from these sources, with NVRTC $(KERNEL_NVRTC) (pip, into target/)
	rm -rf $(KERNEL_CORE) && $(PYTHON) -m maturin build --release --out $(KERNEL_CORE)
	$(PYTHON) -m zipfile -e $(KERNEL_CORE)/*.whl $(KERNEL_CORE)/site
	test -d $(KERNEL_NVRTC_DIR)/nvidia || $(PYTHON) -m pip install -q --no-deps --target $(KERNEL_NVRTC_DIR) \
		"nvidia-cuda-nvrtc==$(KERNEL_NVRTC).*"
	PYTHONPATH=$(KERNEL_NVRTC_DIR):$(KERNEL_CORE)/site $(PYTHON) -m gpu_tok.tools._prebuilt --nvrtc $(KERNEL_NVRTC) \
		--out python/gpu_tok/kernels $(KERNEL_ARCHS)

wheel: kernels  ## the abi3 wheel (every CPython >= 3.11) with prebuilt kernels into dist/, e.g. for benches/gpu_check.sh on a GPU machine
	rm -f dist/gpu_tok-*.whl
	$(PYTHON) -m maturin build --release --features abi3 --out dist
	PYTHONPATH=$(KERNEL_CORE)/site $(PYTHON) -m gpu_tok.tools._prebuilt --check dist/gpu_tok-*.whl $(KERNEL_ARCHS)

# pip prefers a wheel for its own CPython to the abi3 one beside it.
wheel-per-version: kernels  ## a wheel for $(PYTHON)'s CPython only (a list of str made UTF-8 on the pool, outside the GIL) into dist/per-version/
	rm -rf dist/per-version
	$(PYTHON) -m maturin build --release --out dist/per-version
	PYTHONPATH=$(KERNEL_CORE)/site $(PYTHON) -m gpu_tok.tools._prebuilt --check dist/per-version/gpu_tok-*.whl $(KERNEL_ARCHS)

wheelhouse:  ## what gpu_check.sh installs offline on a GPU machine (CPython 3.12, x86_64) into dist/wheelhouse
	$(PYTHON) -m pip download -q --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
		--platform manylinux_2_28_x86_64 -d dist/wheelhouse pytest "tokenizers==0.23.3"

fmt:
	cargo fmt --all
	$(PYTHON) -m ruff check --fix python tests benches
