"""`gpu-tok` (also `python -m gpu_tok`): bench, encode, decode, info, serve.

Exit codes: 0 success, 1 the work failed (unreadable file, bad tokenizer, ids
that disagree with `tokenizers` in a benchmark), 2 bad command-line usage.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import math
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

DESCRIPTION = """\
gpu_tok: exact Hugging Face tokenization, fast.

  gpu-tok bench [--plot out.png]     compare gpu_tok with tokenizers, gigatoken... on fresh text
                                     at batch sizes 1, 64 and 1024 on the embedded default
                                     (Qwen3 + a 1 MB multilingual sample)
  gpu-tok bench --tokenizer DIR --corpus data.jsonl --json out.json
  gpu-tok encode "some text"                     print ids (--json: with tokens and offsets)
  gpu-tok decode 9707 1879                       print text
  gpu-tok info [--tokenizer DIR]                 version, backend, CUDA, threads, plan
  gpu-tok serve --tokenizer DIR --port 8000      HTTP service with dynamic batching (--uds PATH,
                                                 --binary-port N: a binary framed protocol too)
  gpu-tok tokenize --tokenizer DIR data.jsonl --output shards/   corpus to token shards (resumable)

--tokenizer takes tokenizer.json, a model directory, or `default` (the embedded
Qwen3, also used when --tokenizer is left out).
"""


DEFAULT_PEERS = "tokenizers,tiktoken,tokie,kitoken,flash-tokenizer,gigatoken,fastokens,toktok,quicktok"


class UsageError(Exception):
    """A bad argument: exit code 2."""


def _positive_ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _checked(convert: Callable[[str], T], accept: Callable[[T], bool], expected: str) -> Callable[[str], T]:
    """An argparse type: `convert`, then `accept`, else a usage error saying what was expected."""
    def parse(text: str) -> T:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not accept(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value
    return parse


_port = _checked(int, lambda port: 0 <= port <= 65535, "a TCP port from 0 to 65535 (0: any free one)")
_seconds = _checked(float, lambda s: math.isfinite(s) and s > 0, "a positive number of seconds")


def _positive_int(text: str) -> int:
    values = _positive_ints(text)
    if len(values) != 1:
        raise argparse.ArgumentTypeError(f"expected one positive integer, got {text!r}")
    return values[0]


def _count(text: str) -> int:
    return 0 if text.strip() == "0" else _positive_int(text)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpu-tok", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    tokenizer_help = "tokenizer.json, a model directory, or 'default': the embedded Qwen3 (the default)"
    bench = sub.add_parser("bench", help="measure gpu_tok against its peers on the same data",
                           description="Measure gpu_tok and every installed peer on the same corpus, "
                                       "interleaved, and report medians, speedups and parity. Fresh text: "
                                       "each batch size gets disjoint sets of documents, each encoded once "
                                       "per engine as new str objects; repeated text (warm caches) second.")
    bench.add_argument("--tokenizer", help=tokenizer_help)
    bench.add_argument("--corpus", help="documents: .txt (one per line), .jsonl or .parquet "
                                        "(default: the embedded 1 MB multilingual sample)")
    bench.add_argument("--text-field", default="text", help="field holding the text in .jsonl/.parquet (default: text)")
    bench.add_argument("--max-mb", type=float, default=8.0,
                       help="use at most this many MB of the corpus, the embedded one too (default: 8)")
    bench.add_argument("--device", choices=["cpu", "cuda", "auto", "all"], default="cpu",
                       help="gpu_tok device(s) to measure (default: cpu)")
    bench.add_argument("--threads", type=_positive_int,
                       help="threads for every engine; the process is also held to that many cores (default: all)")
    bench.add_argument("--batch-sizes", type=_positive_ints, default=[1, 64, 1024],
                       help="documents per call, comma-separated (default: 1,64,1024)")
    bench.add_argument("--sets", type=_positive_int, default=3,
                       help="disjoint document sets per batch size, each new to every engine (default: 3)")
    bench.add_argument("--repeats", type=_count, default=3,
                       help="repeated-text runs per engine and size, on the first set again (default: 3; 0: none)")
    bench.add_argument("--compare", default=DEFAULT_PEERS,
                       help=f"peers, comma-separated (default: {DEFAULT_PEERS}; also: tokenizers-encode, "
                            "sentencepiece; 'none' for none). A peer that is not installed or cannot load the "
                            "tokenizer is listed as skipped, with the reason")
    bench.add_argument("--json", dest="json_out", help="write the full results here as JSON")
    bench.add_argument("--plot", help="draw throughput against batch size into this PNG")

    encode = sub.add_parser("encode", help="print the ids of a text")
    encode.add_argument("--tokenizer", help=tokenizer_help)
    encode.add_argument("text", nargs="?", default="-", help="the text, or - for standard input (default)")
    encode.add_argument("--no-special-tokens", action="store_true", help="do not add BOS/EOS/CLS/SEP...")
    encode.add_argument("--json", action="store_true", help="print JSON with ids, tokens and offsets")

    decode = sub.add_parser("decode", help="print the text of ids")
    decode.add_argument("--tokenizer", help=tokenizer_help)
    decode.add_argument("ids", nargs="*", help="ids (none or '-': read them from standard input)")
    decode.add_argument("--keep-special-tokens", action="store_true", help="do not skip special tokens")

    info = sub.add_parser("info", help="version, build, backend, CUDA, threads, and a tokenizer's plan")
    info.add_argument("--tokenizer", help="show this tokenizer's plan (default: the embedded Qwen3)")
    info.add_argument("--json", action="store_true", help="print JSON")

    serve = sub.add_parser("serve", help="a tokenization service over HTTP (TCP and/or a Unix socket)",
                           description="Serve /encode, /decode, /info, /health, /metrics; concurrent requests "
                                       "are merged into batches. Needs the serve extra (from the checkout: "
                                       "pip install '.[serve]').")
    serve.add_argument("--tokenizer", help=tokenizer_help)
    serve.add_argument("--host", default="127.0.0.1", help="TCP address to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=_port, help="TCP port, 0 for any free one (default: 8000, or none with --uds)")
    serve.add_argument("--uds", help="also (or, without --port, only) listen on this Unix socket path")
    serve.add_argument("--binary-port", type=_port, help="also serve /encode in the binary framed protocol on this "
                                                         "TCP port, 0 for any free one (docs/SERVE.md)")
    serve.add_argument("--binary-uds", help="also serve the binary framed protocol on this Unix socket path")
    serve.add_argument("--max-batch-tokens", type=_positive_int, default=262_144,
                       help="close a batch once its requests hold this many bytes (default: 262144)")
    serve.add_argument("--max-delay-ms", type=float, default=0.2,
                       help="longest wait for more requests to merge (default: 0.2)")
    serve.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                       help="where engine calls run; auto: the GPU for large batches when usable (default: auto)")
    serve.add_argument("--workers", type=_positive_int, default=1,
                       help="engine calls in flight at once (default: 1; each uses the whole thread pool)")
    serve.add_argument("--max-queue", type=_positive_int, default=4096,
                       help="waiting requests before answering 503 (default: 4096)")
    serve.add_argument("--max-request-bytes", type=_positive_int, default=4 * 1024 * 1024,
                       help="larger bodies get 413 (default: 4 MiB)")
    serve.add_argument("--max-request-cells", type=_positive_int, default=4 * 1024 * 1024,
                       help="a request whose output could hold more token positions (rows x padded length) "
                            "gets 413 (default: 4194304)")
    serve.add_argument("--max-batch-cells", type=_positive_int, default=4 * 1024 * 1024,
                       help="merged requests per engine call stop at this many output token positions "
                            "(default: 4194304)")
    serve.add_argument("--timeout-s", type=_seconds, default=30.0, help="answer 504 after this (default: 30)")
    serve.add_argument("--max-connections", type=_positive_int,
                       help="open connections at once; past it an idle one is closed, or the new one refused "
                            "(default: 1024, fewer when ulimit -n is lower)")
    serve.add_argument("--idle-timeout-s", type=_seconds, default=75.0,
                       help="close a connection with nothing to do for this long (default: 75)")
    serve.add_argument("--header-timeout-s", type=_seconds, default=10.0,
                       help="408 and close when a request head takes longer to arrive (default: 10)")
    serve.add_argument("--body-timeout-s", type=_seconds, default=60.0,
                       help="408 and close when a body or binary frame takes longer to arrive (default: 60)")
    serve.add_argument("--drain-timeout-s", type=_seconds, default=30.0,
                       help="on SIGTERM, the longest wait for answers in flight before closing (default: 30)")
    serve.add_argument("--info-paths", action="store_true",
                       help="show the tokenizer's and sockets' file-system paths in /info (default: hidden)")

    tokenize = sub.add_parser(
        "tokenize", help="tokenize a corpus into token shards (npy, Megatron .bin/.idx or parquet)",
        description="Tokenize documents (.jsonl, .txt, optionally .gz/.zst, or .parquet) into shards of whole "
                    "documents, with a manifest.json of counts and sha256 checksums. Memory stays bounded; a "
                    "re-run with the same arguments skips finished shards and redoes an interrupted one. One run "
                    "at a time per output folder. Needs the corpus extra (from the checkout: pip install "
                    "'.[corpus]'): numpy; pyarrow for Parquet and .zst; orjson, faster JSON.")
    tokenize.add_argument("inputs", nargs="+", metavar="INPUT", help="input files, tokenized in this order")
    tokenize.add_argument("--tokenizer", help=tokenizer_help)
    tokenize.add_argument("--output", required=True, help="output folder (created; a re-run resumes it)")
    tokenize.add_argument("--text-field", default="text",
                          help="JSON field or Parquet column holding the text (default: text)")
    tokenize.add_argument("--format", choices=["npy", "megatron", "parquet"], default="npy",
                          help="npy: flat uint32 ids + int64 offsets; megatron: MMapIndexedDataset .bin/.idx; "
                               "parquet: a list<int32> column input_ids (default: npy)")
    tokenize.add_argument("--append-eos", action="store_true", help="end every document with the EOS token")
    tokenize.add_argument("--add-special-tokens", action="store_true",
                          help="add the tokenizer's BOS/CLS/SEP... to every document (default: off)")
    tokenize.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto", help="(default: auto)")
    tokenize.add_argument("--shard-tokens", type=_positive_int, default=100_000_000,
                          help="a shard ends with the document that brings it to this many tokens "
                               "(default: 100000000)")
    tokenize.add_argument("--batch-mb", type=float, default=4.0,
                          help="MB of text encoded per call; memory holds about four batches (default: 4)")
    tokenize.add_argument("--threads", type=_positive_int, help="encoding threads (default: all cores)")
    return parser


def _subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The parser of one subcommand, so its errors show its own usage."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            return action.choices[command]
    return parser


def _unknown_arguments(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    """What is wrong with arguments the parser did not take, with a suggestion for a
    misspelled option (`--tokenzier` -> `--tokenizer`)."""
    options = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    unknown = [e for e in extras if e.startswith("-") and e != "-"]
    if not unknown:
        return f"unexpected arguments: {' '.join(extras)}"
    option = unknown[0].split("=", 1)[0]
    close = difflib.get_close_matches(option, options, n=1)
    return f"unknown option {option}" + (f" (did you mean {close[0]}?)" if close else "")


def _load(spec: str | None) -> tuple[Any, str, str | None]:
    """(Tokenizer, tokenizer.json text, path of the file or None for the embedded one).
    `default` names the embedded tokenizer unless a file or folder has that name."""
    from . import _data
    from .compat.tokenizer import Tokenizer

    path = Path(spec) if spec is not None else None
    if path is None or (spec == "default" and not path.exists()):
        return Tokenizer.default(), _data.default_tokenizer_json(), None
    if not path.exists():
        raise UsageError(f"--tokenizer {spec}: no such file or directory (or 'default' for the embedded Qwen3)")
    tok = Tokenizer.from_pretrained(path) if path.is_dir() else Tokenizer.from_file(path)
    file = path / "tokenizer.json" if path.is_dir() else path
    return tok, file.read_text(encoding="utf-8"), str(file)


def _bench(args: argparse.Namespace) -> int:
    from . import _data
    from .tools import bench, peers

    tok, json_text, path = _load(args.tokenizer)
    source = path or "embedded Qwen3"
    max_bytes = int(args.max_mb * 1e6)
    if args.corpus:
        if not Path(args.corpus).is_file():
            raise UsageError(f"--corpus {args.corpus}: no such file")
        texts = bench.read_corpus(args.corpus, args.text_field, max_bytes)
    else:
        texts = bench.take((d["text"] for d in _data.sample_corpus()), max_bytes)
    devices = {"cpu": ["cpu"], "cuda": ["cuda"], "auto": ["auto"], "all": ["cpu", "cuda"]}[args.device]
    compare = [] if args.compare.strip() == "none" else [c.strip() for c in args.compare.split(",") if c.strip()]
    unknown = [c for c in compare if c not in peers.PEERS]
    if unknown:
        raise UsageError(f"--compare: unknown peer {unknown[0]!r}; known peers: {', '.join(peers.PEERS)} (or 'none')")
    _warn_if_loaded()
    with tempfile.TemporaryDirectory() as tmp:
        if path is None:  # peers that load only from files get the embedded JSON as a file
            path = os.path.join(tmp, "tokenizer.json")
            Path(path).write_text(json_text, encoding="utf-8")
        steps = len(args.batch_sizes) * (args.sets + args.repeats) * (len(devices) + len(compare))
        with _progress(steps) as advance:
            report = bench.run(tok, json_text, texts, tokenizer_path=path, devices=devices, compare=compare,
                               batch_sizes=args.batch_sizes, sets=args.sets, repeats=args.repeats,
                               threads=args.threads, progress=advance)
    report["tokenizer"]["source"] = source
    report["corpus"]["source"] = args.corpus or "embedded 1 MB multilingual sample"
    print(bench.table(report))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json_out}")
    if args.plot:
        bench.plot(report, args.plot)
        print(f"wrote {args.plot}")
    # Without tokenizers there is no oracle: parity is n/a, which is no failure.
    mismatched = [e["name"] for e in report["engines"] if e["name"].startswith("gpu_tok") and e["status"] == "ok"
                  and e["parity"] is not None and e["parity"]["identical"] != e["parity"]["total"]]
    if mismatched:
        print(f"error: {', '.join(mismatched)} disagreed with tokenizers on some documents", file=sys.stderr)
        return 1
    return 0


def _hold_to_cores(threads: int) -> None:
    """`bench --threads N`: every engine gets N threads where it has a setting
    (fastokens reads FASTOKENS_BPE_THREADS for worker threads of its own), and the
    process is held to N cores, so that an engine that ignores its setting cannot
    use more."""
    os.environ["FASTOKENS_BPE_THREADS"] = str(threads)
    if hasattr(os, "sched_setaffinity"):
        cores = sorted(os.sched_getaffinity(0))
        if threads < len(cores):
            os.sched_setaffinity(0, cores[-threads:])


def _warn_if_loaded() -> None:
    """Timings on a busy machine mislead: say so before measuring."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if load > cores:
        print(f"warning: load average {load:.1f} is above the {cores} cores: other work competes "
              "for them, so the figures below are unreliable", file=sys.stderr)


class _progress:
    """A tqdm bar on a terminal (when tqdm is installed), else nothing."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.bar: Any = None

    def __enter__(self) -> Any:
        try:
            from tqdm import tqdm
        except ImportError:
            return lambda n: None
        self.bar = tqdm(total=self.total, desc="bench", unit="run", disable=None, leave=False)
        return self.bar.update

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()


def _encode(args: argparse.Namespace) -> int:
    tok, _, _ = _load(args.tokenizer)
    text = sys.stdin.read() if args.text == "-" else args.text
    add = not args.no_special_tokens
    if args.json:
        out = tok([text], add_special_tokens=add, return_offsets_mapping=True, return_attention_mask=False)
        ids = out["input_ids"][0]
        record = {"ids": ids, "tokens": [tok.id_to_token(i) for i in ids],
                  "offsets": [list(o) for o in out["offset_mapping"][0]]}
        print(json.dumps(record, ensure_ascii=False))
    else:
        print(" ".join(map(str, tok.encode(text, add_special_tokens=add))))
    return 0


def _decode(args: argparse.Namespace) -> int:
    tok, _, _ = _load(args.tokenizer)
    from ._errors import InvalidInputError

    # No ids, or `-` (as for encode): read them from standard input.
    words = sys.stdin.read().replace(",", " ").split() if args.ids in ([], ["-"]) else args.ids
    try:
        ids = [int(w) for w in words]
    except ValueError:
        raise UsageError("ids must be integers") from None
    for i in ids:
        if not 0 <= i < 2**32 or tok.id_to_token(i) is None:
            size = tok.get_vocab_size()
            raise InvalidInputError(f"id {i} is out of range: this tokenizer has no such token "
                                    f"(it has {size} tokens)")
    print(tok.decode(ids, skip_special_tokens=not args.keep_special_tokens))
    return 0


def _info(args: argparse.Namespace) -> int:
    from ._info import info

    tok = _load(args.tokenizer)[0]  # the embedded Qwen3 without --tokenizer, as for every command
    report = info(tok)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    cuda = report["cuda"]
    print(f"gpu_tok {report['version']}, over the tokenizers crate {report['tokenizers_crate']}")
    print(f"backend: {report['backend']}   threads: {report['threads']}   "
          f"CUDA backend built: {'yes' if report['cuda_backend'] else 'no'}")
    details = []
    if cuda.get("driver_version"):
        version = cuda["driver_version"]
        details.append(f"driver for CUDA {version // 1000}.{version % 1000 // 10}")
    if cuda.get("nvrtc_version"):
        details.append("NVRTC {}.{}".format(*cuda["nvrtc_version"]))
    details += [f"cuda:{d['ordinal']} {d['name']} {d['sm']}" for d in cuda.get("devices") or []]
    state = "available" if cuda["available"] else f"unavailable: {cuda['reason']}"
    print(f"CUDA: {state}" + (f"; {', '.join(details)}" if details else ""))
    if cuda.get("kernel_cache_dir"):
        print(f"kernel cache: {cuda['kernel_cache_dir']}")
    print(f"prebuilt kernels: {' '.join(report['prebuilt_kernels']) or 'none (compiled at first use)'}")
    print("plan:")
    for row in report["plan"]:
        print(f"  {row['stage']:<13} {row['component']:<40} {row['path']:<6} {row['reason']}")
    return 0


def _serve(args: argparse.Namespace) -> int:
    try:
        from .serve import ServeConfig, run
    except ImportError as err:
        print(f"gpu-tok serve needs the serve extra (from the checkout: pip install '.[serve]'): {err}",
              file=sys.stderr)
        return 1
    port = args.port if args.port is not None or args.uds else 8000
    try:  # every setting checked before the tokenizer loads
        config = ServeConfig(host=args.host, port=port, uds=args.uds, binary_port=args.binary_port,
                             binary_uds=args.binary_uds, max_batch_tokens=args.max_batch_tokens,
                             max_delay_ms=args.max_delay_ms, device=args.device, workers=args.workers,
                             max_queue=args.max_queue, max_request_bytes=args.max_request_bytes,
                             timeout_s=args.timeout_s, shutdown_timeout_s=args.drain_timeout_s,
                             max_request_cells=args.max_request_cells, max_batch_cells=args.max_batch_cells,
                             max_connections=args.max_connections, idle_timeout_s=args.idle_timeout_s,
                             header_timeout_s=args.header_timeout_s, body_timeout_s=args.body_timeout_s,
                             info_paths=args.info_paths)
    except ValueError as err:
        raise UsageError(str(err)) from None
    tok, _, path = _load(args.tokenizer)
    run(tok, config, path, ready=lambda service: print("gpu-tok serve: listening on " + " ".join(service.addresses),
                                                       flush=True))
    print("gpu-tok serve: stopped", flush=True)
    return 0


def _tokenize(args: argparse.Namespace) -> int:
    try:
        from . import corpus
    except ImportError as err:
        print(f"gpu-tok tokenize needs the corpus extra (from the checkout: pip install '.[corpus]'): "
              f"{err}", file=sys.stderr)
        return 1
    if args.batch_mb <= 0:
        raise UsageError("--batch-mb must be positive")
    tok, json_text, path = _load(args.tokenizer)
    digest = hashlib.sha256(json_text.encode("utf-8")).hexdigest()  # the file's, not a costly re-serialisation
    try:
        summary = corpus.tokenize_corpus(
            tok, args.inputs, args.output, text_field=args.text_field, fmt=args.format, append_eos=args.append_eos,
            add_special_tokens=args.add_special_tokens, device=args.device, shard_tokens=args.shard_tokens,
            batch_bytes=int(args.batch_mb * 1e6), progress=True, tokenizer_source=path or "embedded Qwen3",
            tokenizer_digest=digest)
    except ImportError as err:  # pyarrow, for Parquet and .zst: the message names the extra
        print(f"gpu-tok: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("gpu-tok tokenize: interrupted; the same command resumes after the last finished shard",
              file=sys.stderr)
        return 130
    print("\n".join(corpus.summary_lines(summary)))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        command = _subparser(parser, args.command)
        command.error(_unknown_arguments(command, extras))  # exits 2 with the subcommand's usage
    if getattr(args, "threads", None):
        # Before any pool exists: gpu_tok's and tokenizers' (rayon) read these at first use.
        os.environ["GPU_TOK_NUM_THREADS"] = os.environ["RAYON_NUM_THREADS"] = str(args.threads)
        if args.command == "bench":
            _hold_to_cores(args.threads)
    from ._errors import GpuTokError

    commands = {"bench": _bench, "encode": _encode, "decode": _decode, "info": _info, "serve": _serve,
                "tokenize": _tokenize}
    try:
        return commands[args.command](args)
    except UsageError as err:
        _subparser(parser, args.command).error(str(err))  # exits 2 with the subcommand's usage
    except (GpuTokError, OSError, ValueError) as err:
        print(f"gpu-tok: error: {err}", file=sys.stderr)
        return 1
    return 1


if __name__ == "__main__":
    sys.exit(main())
