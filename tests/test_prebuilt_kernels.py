"""Prebuilt kernels (CPU only): the wheel-build step (`gpu_tok.tools._prebuilt`, run
by `make kernels`) compiles CUBINs the core lists and would load for their arch
before compiling, ignoring stale or damaged files; wheels carry them."""

from __future__ import annotations

import re
import shutil
import struct
import zipfile
from pathlib import Path

import gpu_tok
import pytest
from gpu_tok import _core
from gpu_tok.tools import _prebuilt

ROOT = Path(__file__).resolve().parent.parent
ARCHS = ["sm_80", "sm_90"]
EM_CUDA = 190


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real build step, for two archs (about 3 s each)."""
    out = tmp_path_factory.mktemp("kernels")
    (out / "gt_batch-0123456789abcdef-sm_90-nvrtc13.0.cubin").write_bytes(b"\x7fELF old")  # replaced
    _prebuilt.build(out, ARCHS)
    return out


def test_the_core_lists_what_the_build_step_wrote(folder: Path) -> None:
    listed = _core.prebuilt_kernels(folder)
    assert [arch for arch, _ in listed] == ARCHS
    assert sorted(path for _, path in listed) == sorted(folder.iterdir()), "the stale file was removed"
    for arch, path in listed:
        assert re.fullmatch(rf"gt_batch-[0-9a-f]{{16}}-{arch}-nvrtc\d+\.\d+\.cubin", path.name)
    assert _core.prebuilt_kernels(folder / "missing") == []


@pytest.mark.parametrize("arch", ARCHS)
def test_each_is_a_cubin_for_its_arch(folder: Path, arch: str) -> None:
    image = dict(_core.prebuilt_kernels(folder))[arch].read_bytes()
    assert image[:4] == b"\x7fELF" and struct.unpack_from("<H", image, 18)[0] == EM_CUDA
    e_flags = struct.unpack_from("<I", image, 48)[0]
    assert (e_flags >> 8) & 0xFF == int(arch[3:]), hex(e_flags)  # NVRTC 13: the SM in bits 8-15
    for kernel in _core.kernel_sources()[1]["gt_batch.cu"]:
        assert kernel.encode() in image


def test_a_device_takes_the_prebuilt_cubin_of_its_arch(folder: Path, tmp_path: Path) -> None:
    for arch, path in _core.prebuilt_kernels(folder):
        assert _core.find_kernels(arch, folder, tmp_path) == (path, "prebuilt", path.stat().st_size)
    assert list(tmp_path.iterdir()) == [], "neither compiled nor cached"


def test_stale_damaged_or_missing_prebuilt_kernels_fall_back_to_nvrtc(folder: Path, tmp_path: Path) -> None:
    cache, shipped = tmp_path / "cache", tmp_path / "shipped"
    shipped.mkdir()
    good = dict(_core.prebuilt_kernels(folder))["sm_90"]
    stale = shipped / re.sub(r"-[0-9a-f]{16}-", "-0123456789abcdef-", good.name)
    shutil.copy(good, stale)  # other kernel sources: never loaded
    path, origin, _ = _core.find_kernels("sm_90", shipped, cache)
    assert origin == "nvrtc" and path.parent == cache
    assert path.read_bytes() == good.read_bytes(), "the prebuilt CUBIN is what NVRTC makes"
    (shipped / good.name).write_bytes(b"garbage")  # damaged: passed over
    assert _core.find_kernels("sm_90", shipped, cache)[:2] == (path, "cache")
    assert (shipped / good.name).read_bytes() == b"garbage", "a shipped file is left alone"
    assert _core.find_kernels("sm_90", tmp_path / "missing", cache)[:2] == (path, "cache")


def test_build_info_names_the_packages_kernels_folder() -> None:
    report = gpu_tok.info(probe_cuda=False)
    assert Path(report["prebuilt_kernel_dir"]) == Path(_core.__file__).resolve().parent / "kernels"
    assert report["prebuilt_kernels"] == [arch for arch, _ in _core.prebuilt_kernels()]


def test_the_wheel_check_reads_the_embedded_list(folder: Path, tmp_path: Path) -> None:
    wheel = tmp_path / "gpu_tok-0.1.0-cp311-abi3-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("gpu_tok/__init__.py", "")
        for _, path in _core.prebuilt_kernels(folder):
            archive.write(path, _prebuilt.WHEEL_FOLDER + path.name)
    assert _prebuilt.check_wheel(wheel, ARCHS) == ARCHS
    with pytest.raises(RuntimeError, match="sm_120"):
        _prebuilt.check_wheel(wheel, [*ARCHS, "sm_120"])


def test_wheels_are_built_with_the_kernels_and_the_repository_has_none() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '{ path = "python/gpu_tok/kernels/*.cubin", format = "wheel" }' in pyproject
    assert "/python/gpu_tok/kernels/" in (ROOT / ".gitignore").read_text().splitlines()
    makefile = (ROOT / "Makefile").read_text()
    archs = re.search(r"^KERNEL_ARCHS \?= (.*)$", makefile, re.M)
    assert archs and tuple(archs.group(1).split()) == _prebuilt.ARCHS
    assert re.search(r"^wheel: kernels\b", makefile, re.M)
    assert "make wheel" in (ROOT / "Dockerfile.cuda").read_text()
