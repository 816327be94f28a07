"""benches/gpu_bench.py's measurement of where device="auto" should start
using the GPU, run here through the CUDA pipeline emulated on the host."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import corpus_sample, ours

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))
import gpu_bench  # noqa: E402


def point(size: int, cpu_s: float, gpu_s: float) -> dict:
    return {"bytes": size, "cpu_s": cpu_s, "gpu_s": gpu_s}


def test_the_crossover_is_where_the_gpu_wins_from_then_on() -> None:
    assert gpu_bench.crossover([point(1, 1, 2), point(2, 2, 1), point(4, 4, 1)]) == 2
    # a win at a small size that a larger one undoes does not count
    assert gpu_bench.crossover([point(1, 2, 1), point(2, 1, 2), point(4, 4, 1)]) == 4
    assert gpu_bench.crossover([point(1, 2, 1), point(2, 3, 1)]) == 1
    assert gpu_bench.crossover([point(1, 1, 2), point(2, 1, 1)]) is None
    assert gpu_bench.crossover([]) is None


def test_auto_crossover_times_both_ways_and_restores_the_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpu_tok import _placement

    monkeypatch.setattr(_placement, "_auto_gpu_ready", lambda: True)
    before = (_placement.AUTO_MIN_BYTES, _placement.AUTO_DEVICE)
    docs = corpus_sample()[:40]
    result = gpu_bench.auto_crossover(ours("qwen3"), docs, repeats=1, budget=gpu_bench.Budget(60),
                                      sizes=[4 << 10, 32 << 10], gpu_core="emulator")
    assert (_placement.AUTO_MIN_BYTES, _placement.AUTO_DEVICE) == before
    points = result["points"]
    assert [p["bytes"] >= size for p, size in zip(points, [4 << 10, 32 << 10], strict=True)] == [True, True]
    assert all(p["cpu_s"] > 0 and p["gpu_s"] > 0 for p in points)
    assert result["threshold_bytes"] == gpu_bench.crossover(points)
    assert result["current_bytes"] == before[0]


def test_auto_crossover_fails_when_auto_stays_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpu_tok import _placement

    monkeypatch.setattr(_placement, "_auto_gpu_ready", lambda: False)
    with pytest.raises(RuntimeError, match="did not offload"):
        gpu_bench.auto_crossover(ours("qwen3"), corpus_sample()[:10], repeats=1, budget=gpu_bench.Budget(60),
                                 sizes=[1 << 10], gpu_core="emulator")


def test_the_table_says_where_auto_should_start() -> None:
    points = [point(64 << 10, 1.0, 2.0), point(1 << 20, 4.0, 2.0)]
    report = {"machine": {"threads": 16, "sync_via": "torch"},
              "config": {"mb": 256, "ref_mb": 32, "repeats": 3},
              "tokenizers": {"qwen3": {"auto_crossover": {"points": points, "threshold_bytes": 1 << 20,
                                                          "current_bytes": 1 << 20}}}}
    line = next(line for line in gpu_bench.table(report).splitlines() if "auto:" in line)
    assert "64 KiB 0.50x" in line and "1024 KiB 2.00x" in line and f"from {1 << 20} bytes" in line


def test_the_whole_benchmark_runs_on_the_emulator(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every measurement of the GPU benchmark, with the host emulator standing
    in for CUDA: a GPU's time is too rare to lose to a broken script."""
    import gpu_tok
    from gpu_tok import _placement

    real_info, real_resolve = gpu_tok.info, _placement.resolve

    def info() -> dict:
        found = real_info()
        return {**found, "cuda": {**(found.get("cuda") or {}), "available": True}}

    def resolve(device: object, *args: object, **kwargs: object) -> _placement.Placement:
        if str(device) == "cuda":
            return _placement.Placement(f"emulator:{_placement.chunk_bytes() or 1 << 20}")
        return real_resolve(device, *args, **kwargs)

    monkeypatch.setattr(gpu_tok, "info", info)
    monkeypatch.setattr(_placement, "resolve", resolve)
    monkeypatch.setattr(_placement, "_auto_gpu_ready", lambda: True)
    monkeypatch.setattr(_placement, "AUTO_DEVICE", "emulator")
    monkeypatch.setattr(gpu_bench, "AUTO_SIZES", [16 << 10, 64 << 10])
    monkeypatch.setattr(gpu_bench, "CHUNK_BYTES", 64 << 10)
    out = tmp_path / "gpu_bench.json"
    assert gpu_bench.main(["--tokenizers", "qwen3", "--shared", "none", "--mb", "0.2", "--ref-mb", "0.1",
                           "--repeats", "1", "--json", str(out)]) == 0
    result = json.loads(out.read_text())["tokenizers"]["qwen3"]
    assert result["errors"] == []
    for key in ("cuda_ragged", "cuda_padded", "cuda_chunked", "cuda_arrow", "cpu", "tokenizers"):
        assert result[key]["mb_per_s"] > 0, key
    assert result["cuda_kernels"]["kernels_ms"] > 0
    assert result["parity"]["identical"] == result["parity"]["total"] > 0
    assert len(result["auto_crossover"]["points"]) == 2
