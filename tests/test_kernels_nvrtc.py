"""Every CUDA kernel compiles under NVRTC (pip wheel, no GPU needed) for the
architectures we ship for, with the JIT's own compiler and the sources built
into the binary; the on-disk kernel cache is used and refreshed as it should."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import gpu_tok
import pytest
from gpu_tok import CudaUnavailableError, KernelCompileError, _core, _nvrtc

FILES, KERNELS = _core.kernel_sources()

# The pip wheel's libnvrtc, loaded by full path before the core looks it up by name.
_nvrtc.load()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("unit", sorted(KERNELS))
def test_kernel_compiles(unit: str, arch: str) -> None:
    cubin = _core.nvrtc_compile(unit, list(FILES.items()), arch)
    assert cubin[:4] == b"\x7fELF"  # a CUBIN is an ELF image
    for kernel in KERNELS[unit]:
        assert kernel.encode() in cubin, f"{kernel} missing from {unit}'s CUBIN"


def test_every_batch_kernel_is_listed() -> None:
    names = set(KERNELS["gt_batch.cu"])
    assert {"gt_pretok_count", "gt_pretok_fill", "gt_order_count", "gt_order_fill", "gt_bpe_words",
            "gt_bpe_long_words", "gt_spm_words", "gt_spm_long_words", "gt_unigram_words",
            "gt_wordpiece_words", "gt_compact",
            "gt_scan_sum", "gt_scan_apply", "gt_part_spans", "gt_row_spans", "gt_pack"} == names


def test_nvrtc_loads_from_the_wheel() -> None:
    major, _ = _nvrtc.version()
    assert major >= 12


def test_a_broken_kernel_is_reported_as_a_compile_error() -> None:
    files = dict(FILES)
    files["broken.cu"] = '#include "gt_common.cuh"\nextern "C" __global__ void k() { undefined_symbol(); }\n'
    with pytest.raises(KernelCompileError, match="undefined_symbol") as err:
        _core.nvrtc_compile("broken.cu", list(files.items()), "sm_80")
    # Not "CUDA is missing": it is a bug to report ("auto" warns, "cuda" raises it).
    assert not isinstance(err.value, CudaUnavailableError) and isinstance(err.value, gpu_tok.CudaError)


def test_kernel_cache_is_written_then_reused(tmp_path: Path) -> None:
    path, from_cache, size = _core.compile_kernels("sm_90", str(tmp_path))
    assert not from_cache and Path(path).parent == tmp_path and size > 0
    assert Path(path).read_bytes()[:4] == b"\x7fELF"
    assert "sm_90" in Path(path).name and "nvrtc" in Path(path).name
    again, from_cache, _ = _core.compile_kernels("sm_90", str(tmp_path))
    assert (again, from_cache) == (path, True)
    # A damaged file is not trusted: compiled again and replaced.
    Path(path).write_bytes(b"garbage")
    _, from_cache, _ = _core.compile_kernels("sm_90", str(tmp_path))
    assert not from_cache and Path(path).read_bytes()[:4] == b"\x7fELF"
    assert [p.name for p in tmp_path.iterdir()] == [Path(path).name]  # no temporary files left


def test_an_unwritable_cache_still_compiles(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    _, from_cache, size = _core.compile_kernels("sm_80", str(blocker / "kernels"))
    assert not from_cache and size > 0


def test_cache_dir_follows_the_environment(tmp_path: Path) -> None:
    code = "import gpu_tok; print(gpu_tok.info()['cuda']['kernel_cache_dir'])"
    env = dict(os.environ, GPU_TOK_KERNEL_CACHE=str(tmp_path / "k"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(tmp_path / "k")
