"""The benchmark harness (gpu_tok.bench, gpu-tok bench): fresh text, parity, the
corpus cap and the plot. Fast, and without the optional peers: the engines
here are recorders that return made-up ids."""

from __future__ import annotations

import collections
import json
from typing import Any

import pytest
from gpu_tok import bench, cli, peers

CORPUS = [f"doc {i}: " + "grüße wörld " * (i % 7 + 1) + "東京" * (i % 3) for i in range(40)]


class Recorder:
    """An engine that keeps every str object it was given (so no id() is reused)
    and answers [len(text)] as the ids (+1 on the documents in `wrong`)."""

    def __init__(self, name: str, wrong: frozenset[str] = frozenset(), one_call: bool = True) -> None:
        self.name, self.wrong = name, wrong
        self.calls: list[tuple[str, list[str]]] = []  # ("one" | "batch", the texts)
        self.engine = peers.Peer(name, "0", self.encode, lambda rows: rows,
                                   self.encode_one if one_call else None, lambda row: row)

    def ids(self, text: str) -> list[int]:
        return [len(text) + (text in self.wrong)]

    def encode(self, texts: list[str]) -> list[list[int]]:
        self.calls.append(("batch", texts))
        return [self.ids(t) for t in texts]

    def encode_one(self, text: str) -> list[int]:
        self.calls.append(("one", [text]))
        return self.ids(text)

    def corpus_calls(self) -> list[tuple[str, list[str]]]:
        """The calls on corpus documents (warm-up calls use made-up words)."""
        return [(kind, texts) for kind, texts in self.calls if texts and texts[0] in CORPUS]


class Vocab:
    def get_vocab_size(self) -> int:
        return 7


def run_with(monkeypatch: pytest.MonkeyPatch, recorders: list[Recorder], **options: Any) -> dict[str, Any]:
    by_name = {r.name: r for r in recorders}
    monkeypatch.setattr(bench.peers, "gpu_tok_peer", lambda tok, device: by_name[f"gpu_tok[{device}]"].engine)

    def load_peer(name: str, *args: Any) -> peers.Peer:
        if name not in by_name:
            raise peers.Skipped(f"{name} is not installed")
        return by_name[name].engine

    monkeypatch.setattr(bench.peers, "load_peer", load_peer)
    compare = [r.name for r in recorders if not r.name.startswith("gpu_tok")] + options.pop("extra", [])
    return bench.run(Vocab(), "{}", list(CORPUS), compare=compare, **options)  # type: ignore[arg-type]


def test_fresh_text_each_document_once_per_engine_as_new_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    recorders = [Recorder("gpu_tok[cpu]"), Recorder("tokenizers"), Recorder("peer")]
    report = run_with(monkeypatch, recorders, batch_sizes=(1, 4), sets=3, repeats=0)
    assert report["settings"]["sets"] == 3 and len(report["corpus"]["set_bytes"]) == 6
    originals = {id(t) for t in CORPUS}
    objects: list[int] = []
    size_of_doc: dict[str, set[str]] = collections.defaultdict(set)
    for r in recorders:
        seen = collections.Counter()
        for kind, texts in r.corpus_calls():
            seen.update(texts)
            objects.extend(id(t) for t in texts)
            for t in texts:
                size_of_doc[t].add(kind)
            assert kind == "one" or len(texts) <= 4
        # Every document exactly once per engine: no set is timed twice by one engine.
        assert seen == collections.Counter(CORPUS), r.name
    # New str objects every time: never the caller's, never one another engine saw.
    assert len(objects) == len(set(objects)) == 3 * len(CORPUS)
    assert not originals & set(objects)
    # The two batch sizes have disjoint sets: a document belongs to one of them.
    assert all(len(kinds) == 1 for kinds in size_of_doc.values())
    assert {next(iter(k)) for k in size_of_doc.values()} == {"one", "batch"}


def test_engines_take_turns_and_repeated_text_reuses_one_set(monkeypatch: pytest.MonkeyPatch) -> None:
    order: list[str] = []
    recorders = [Recorder("gpu_tok[cpu]"), Recorder("tokenizers"), Recorder("peer")]
    for r in recorders:
        encode = r.engine.encode

        def logged(texts: list[str], encode: Any = encode, name: str = r.name) -> Any:
            if texts and texts[0] in CORPUS:
                order.append(name)
            return encode(texts)

        r.engine.encode = logged
    report = run_with(monkeypatch, recorders, batch_sizes=(64,), sets=3, repeats=2)
    firsts = [order[i] for i in range(0, 9, 3)]  # the first engine of each fresh set
    assert len(set(firsts)) == 3
    for r in recorders:
        calls = r.corpus_calls()
        fresh, repeated = calls[:3], calls[3:]
        assert len(repeated) == 2  # the same str objects both times: warm caches
        assert all(a is b for a, b in zip(repeated[0][1], repeated[1][1], strict=True))
        assert repeated[0][1] == fresh[0][1]  # ... of the first fresh set
    ours = next(e for e in report["engines"] if e["name"] == "gpu_tok[cpu]")["results"][0]
    assert len(ours["fresh"]["seconds"]) == 3 and len(ours["repeated"]["seconds"]) == 2


def test_parity_against_the_oracle_and_the_fastest_exact_peer(monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = frozenset(CORPUS[:5])
    recorders = [Recorder("gpu_tok[cpu]"), Recorder("tokenizers"), Recorder("peer", wrong)]
    report = run_with(monkeypatch, recorders, batch_sizes=(8,), sets=2, repeats=0, extra=["missing"])
    engines = {e["name"]: e for e in report["engines"]}
    assert engines["gpu_tok[cpu]"]["parity"] == {"identical": 40, "total": 40}
    assert engines["peer"]["parity"] == {"identical": 35, "total": 40}
    # A peer that cannot run is listed with the reason, not dropped.
    assert engines["missing"]["status"] == "skipped" and "not installed" in engines["missing"]["reason"]
    best = engines["gpu_tok[cpu]"]["results"][0]["vs_fastest_exact_peer"]
    assert best["peer"] == "tokenizers"  # "peer" is faster or not, but it is not exact
    text = bench.table(report)
    assert "87.50% (35/40)" in text and "missing" in text and "vs the fastest exact peer" in text


def test_parity_is_na_without_the_oracle(monkeypatch: pytest.MonkeyPatch) -> None:
    report = run_with(monkeypatch, [Recorder("gpu_tok[cpu]"), Recorder("peer")], batch_sizes=(8,), sets=2,
                      repeats=0, extra=["tokenizers"])
    engines = {e["name"]: e for e in report["engines"]}
    assert engines["tokenizers"]["status"] == "skipped"
    assert engines["gpu_tok[cpu]"]["parity"] is None and engines["peer"]["parity"] is None
    assert engines["gpu_tok[cpu]"]["results"][0]["vs_fastest_exact_peer"] is None
    assert "n/a" in bench.table(report) and "0.00%" not in bench.table(report)


def test_cli_without_tokenizers_says_na_and_exits_0(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture) -> None:
    def missing(*args: Any, **kwargs: Any) -> Any:
        raise peers.Skipped("tokenizers is not installed")

    monkeypatch.setattr(peers, "_hf", missing)
    code = cli.main(["bench", "--compare", "tokenizers", "--max-mb", "0.05", "--batch-sizes", "16",
                     "--sets", "2", "--repeats", "0"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "tokenizers is not installed" in out and "n/a" in out and "0.00%" not in out


def test_max_mb_is_honoured_for_the_embedded_corpus(tmp_path: Any, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "r.json"
    code = cli.main(["bench", "--max-mb", "0.1", "--compare", "none", "--batch-sizes", "16", "--sets", "2",
                     "--repeats", "0", "--json", str(out)])
    assert code == 0, capsys.readouterr()
    corpus = json.loads(out.read_text())["corpus"]
    assert 0 < corpus["bytes"] <= 100_000 and corpus["documents"] < 169


def test_split_sets_are_disjoint_balanced_and_in_corpus_order() -> None:
    docs = [bytes([65 + i % 26]) * (10 + i * 7 % 50) + str(i).encode() for i in range(100)]
    sets = bench.split_sets(docs, 4)
    assert sorted(d for s in sets for d in s) == sorted(docs)
    for s in sets:
        assert [docs.index(d) for d in s] == sorted(docs.index(d) for d in s)
    sizes = [sum(map(len, s)) for s in sets]
    assert max(sizes) - min(sizes) <= max(map(len, docs))
    assert bench.plan_sets(10, (1, 64), 3) == 3 and bench.plan_sets(3, (1, 64), 3) == 1
    with pytest.raises(ValueError, match="too few for 2 batch sizes"):
        bench.plan_sets(1, (1, 64), 3)


def test_fresh_strs_are_new_objects_with_the_same_text() -> None:
    docs = [t.encode() for t in CORPUS]
    first, second = bench.fresh_strs(docs), bench.fresh_strs(docs)
    assert first == second == CORPUS
    assert all(a is not b for a, b in zip(first, second, strict=True))


def fake_report(parity: dict[str, Any] | None) -> dict[str, Any]:
    def engine(name: str, rates: list[float], parity: dict[str, Any] | None) -> dict[str, Any]:
        return {"name": name, "status": "ok", "parity": parity,
                "results": [{"batch_size": s, "mb_per_s": r} for s, r in zip((1, 64, 1024), rates, strict=False)]}

    return {"engines": [engine("gpu_tok[cpu]", [3.0, 40.0, 90.0], parity),
                        engine("tokenizers", [0.6, 1.2, 1.5], parity),
                        engine("broken", [], None) | {"status": "skipped"}],
            "tokenizer": {"vocab_size": 7}, "corpus": {"documents": 3, "bytes": 10}, "machine": {"threads": 2}}


def test_plot_ticks_at_measured_sizes_legend_beside_with_parity() -> None:
    pytest.importorskip("matplotlib")  # the bench extra's
    fig = bench.figure(fake_report({"identical": 3, "total": 3}))
    ax = fig.axes[0]
    assert list(ax.get_xticks()) == [1, 64, 1024]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "64", "1024"]
    low, high = ax.get_ylim()
    labelled = [t for t in ax.get_yticks() if low <= t <= high]
    assert len(labelled) >= 4  # not just 1 and 10
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["gpu_tok[cpu] (parity 100.00%)",
                                                          "tokenizers (parity 100.00%)"]
    fig.canvas.draw()
    box = legend.get_window_extent()
    for line in ax.get_lines():
        for x, y in ax.transData.transform(line.get_xydata()):
            assert not box.contains(x, y)  # the legend covers no point
    na = bench.figure(fake_report(None)).axes[0].get_legend()
    assert "gpu_tok[cpu] (parity n/a)" in [t.get_text() for t in na.get_texts()]


def test_flat_rows_and_byte_level_vocabulary() -> None:
    from array import array

    ids, offsets = array("I", [5, 6, 7]).tobytes(), array("Q", [0, 2, 2, 3]).tobytes()
    assert peers._flat_rows(ids, offsets) == [[5, 6], [], [7]]
    spec = {"model": {"type": "BPE", "vocab": {"a": 1, "Ġ": 0}}}
    assert peers._byte_level_tokens(spec) == [b" ", b"a"]
    assert peers._byte_level_tokens({"model": {"type": "BPE", "vocab": {"a": 3}}}) is None
    assert peers._byte_level_tokens({"model": {"type": "WordPiece", "vocab": {"a": 0}}}) is None


def test_toktok_runs_only_its_own_vocabulary(monkeypatch: pytest.MonkeyPatch) -> None:
    """toktok has no loader: its compiled-in encoding must have exactly this vocabulary."""
    import types

    class Encoding:
        def __init__(self, name: str, data_dir: str) -> None:
            self.name = name

        def token_byte_values(self) -> list[bytes]:
            return [b" ", b"a"] if self.name == "mine" else [b"a", b" "]

        def encode_ordinary(self, text: str) -> list[int]:
            return []

    core = types.SimpleNamespace(BUILTIN_ENCODINGS=["other", "mine"], Tokenizer=Encoding)
    monkeypatch.setattr(peers, "_require", lambda module: types.SimpleNamespace(_toktok=core))
    spec = {"model": {"type": "BPE", "vocab": {"Ġ": 0, "a": 1}}}
    assert peers._toktok(json.dumps(spec), 1).note == "built-in mine"
    with pytest.raises(peers.Skipped, match="no built-in encoding with this vocabulary"):
        peers._toktok(json.dumps({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}}}), 1)
    with pytest.raises(peers.Skipped, match="does not normalize"):
        peers._toktok(json.dumps(spec | {"normalizer": {"type": "NFKC"}}), 1)
    empty = spec | {"normalizer": {"type": "Sequence", "normalizers": []}}  # normalizes nothing
    assert peers._toktok(json.dumps(empty), 1).note == "built-in mine"
