"""`gpu_tok.info()`: the version, build, backend and CUDA status, and the
native module's `Tensor` and version, as the package exports them."""

from __future__ import annotations

from typing import Any, Protocol

from . import _core


class _Planned(Protocol):
    @property
    def plan(self) -> list[dict[str, str]]: ...


Tensor = _core.Tensor
__version__: str = _core.__version__


def info(tokenizer: _Planned | None = None, *, probe_cuda: bool = True) -> dict[str, Any]:
    """Version, build (with the SMs whose kernels come prebuilt), backend, CUDA
    status and threads; with a tokenizer, its plan.

    The CUDA probe loads the driver and calls cuInit; a process that forks
    afterwards cannot use CUDA in the child, so pass `probe_cuda=False` there.
    """
    report: dict[str, Any] = dict(_core.build_info())
    report["threads"] = _core.num_threads()
    report["cuda"] = _cuda_report() if probe_cuda else {"available": None, "reason": "not probed"}
    cuda = report["cuda"]
    # A GPU needs NVRTC unless the wheel carries its SM's kernels prebuilt.
    devices_prebuilt = all(d["sm"] in report["prebuilt_kernels"] for d in cuda.get("devices") or [])
    report["backend"] = "cuda" if cuda["available"] and (cuda.get("nvrtc_version") or devices_prebuilt) else "cpu"
    if tokenizer is not None:
        report["plan"] = tokenizer.plan
    return report


def _cuda_report() -> dict[str, Any]:
    """The core's probe (driver, devices with name and SM, NVRTC, kernel cache
    folder), after loading the pip wheel's NVRTC (if any) so the core finds it."""
    from . import _placement

    _placement.cuda_usable()
    return dict(_core.cuda_probe())
