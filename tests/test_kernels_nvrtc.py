"""Every CUDA kernel compiles under NVRTC (pip wheel, no GPU needed) for the
architectures we ship for, from the very sources built into the binary."""

from __future__ import annotations

import pytest
from gpu_tok import CudaUnavailableError, _core, _nvrtc

FILES, KERNELS = _core.kernel_sources()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("unit", sorted(KERNELS))
def test_kernel_compiles(unit: str, arch: str) -> None:
    cubin = _nvrtc.compile_cubin(unit, FILES, arch)
    assert cubin[:4] == b"\x7fELF"  # a CUBIN is an ELF image
    for kernel in KERNELS[unit]:
        assert kernel.encode() in cubin, f"{kernel} missing from {unit}'s CUBIN"


def test_nvrtc_loads_from_the_wheel() -> None:
    major, _ = _nvrtc.version()
    assert major >= 12


def test_a_broken_kernel_is_reported() -> None:
    files = dict(FILES)
    files["broken.cu"] = '#include "gt_common.cuh"\nextern "C" __global__ void k() { undefined_symbol(); }\n'
    with pytest.raises(CudaUnavailableError, match="undefined_symbol"):
        _nvrtc.compile_cubin("broken.cu", files, "sm_80")
