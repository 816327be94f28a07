"""The Rust core's layering holds without a reviewer: every `crate::`,
`super::` and `self::` path in rust/**/*.rs (in `use` trees and inline, test
code under `#[cfg(test)]` aside) points down the layers of
docs/ARCHITECTURE.md, and no two source files import each other, directly or
round a longer loop (a file may use its own folder's mod.rs, which declares it).

The layers, bottom up (written here and in docs/ARCHITECTURE.md; the test
checks that the two agree): leaves <- plan <- {cpu, cuda} <- engine <- py.
The two backends never import each other; `py` reaches the backends only
through the engine (its device seam, `engine/device.rs`). Test code may use
any layer, as an integration test would: it ships nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

from test_layers import _cycles

ORDER = "leaves <- plan <- {cpu, cuda} <- engine <- py"
RUST = Path(__file__).parent.parent / "rust"
# The files of the leaf layer (each a file or folder under rust/).
LEAVES = {"error", "memory", "memory_hints", "layout", "dlpack", "pool", "kernels", "short_words"}
RANK = {"leaves": 0, "plan": 1, "cpu": 2, "cuda": 2, "engine": 3, "py": 4, "crate": 5}


def _module(path: Path) -> str:
    """`rust/cpu/encode.rs` -> `cpu::encode`; `rust/cpu/mod.rs` -> `cpu`; `rust/lib.rs` -> `crate`."""
    parts = list(path.relative_to(RUST).with_suffix("").parts)
    if parts[-1] == "mod":
        parts.pop()
    if parts == ["lib"]:
        return "crate"
    return "::".join(parts)


def layer(module: str) -> str:
    top = module.split("::")[0]
    return "leaves" if top in LEAVES else top


_TOKEN = re.compile(
    r"""(?P<comment>//[^\n]*|/\*(?:.|\n)*?\*/)
      | (?P<raw>r(?P<hashes>\#*)"(?:.|\n)*?"(?P=hashes))
      | (?P<string>b?"(?:\\.|[^"\\])*")
      | (?P<char>b?'(?:\\u\{[0-9a-fA-F]+\}|\\.|[^'\\])')
    """,
    re.VERBOSE,
)


def _code(text: str) -> str:
    """The text without comments, strings and character literals (lifetimes kept)."""
    return _TOKEN.sub(lambda m: " " if m.group("comment") else '""', text)


def _without_tests(code: str) -> str:
    """The code less every item under `#[cfg(test)]` (a `mod tests { ... }`, a `mod x;`, a function)."""
    out, at = [], 0
    for found in re.finditer(r"#\[cfg\((?:test|all\(test[^\]]*)\)\]", code):
        if found.start() < at:
            continue
        out.append(code[at:found.start()])
        depth, i = 0, found.end()
        while i < len(code):
            if code[i] == "{":
                depth += 1
            elif code[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            elif code[i] == ";" and depth == 0:
                break
            i += 1
        at = i + 1
    out.append(code[at:])
    return "".join(out)


def _use_paths(tree: str) -> list[str]:
    """`a::{b, c::{d, self}, e as f}` -> ["a::b", "a::c::d", "a::c", "a::e"]."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+\w+", "", tree))
    brace = tree.find("{")
    if brace < 0:
        return [re.sub(r"::(self|\*)$", "", tree)]
    prefix, inner = tree[:brace].rstrip(":"), tree[brace + 1: tree.rfind("}")]
    items, depth, start = [], 0, 0
    for i, c in enumerate(inner + ","):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "," and depth == 0:
            if inner[start:i]:
                items.append(inner[start:i])
            start = i + 1
    return [prefix if item in ("self", "*") else f"{prefix}::{p}" for item in items for p in
            ([""] if item in ("self", "*") else _use_paths(item))] if items else [prefix]


def _paths(code: str) -> list[str]:
    """Every crate-relative path the code names: `use` trees and inline `crate::`/`super::`/`self::` paths."""
    found = []
    for use in re.finditer(r"\buse\s+([^;]*);", code):
        found += [p.replace("::::", "::").rstrip(":") for p in _use_paths(use.group(1))]
    rest = re.sub(r"\buse\s+[^;]*;", " ", code)
    found += [m.group(0) for m in re.finditer(r"\b(?:crate|super|self)(?:::(?:super|[a-z_][a-z0-9_]*))+", rest)]
    return found


def _resolve(path: str, module: str, known: set[str]) -> str | None:
    """The source file (module) a path lands in, or None for paths outside the crate."""
    parts = path.split("::")
    if parts[0] == "crate":
        base, parts = [], parts[1:]
    elif parts[0] in ("super", "self"):
        base = [] if module == "crate" else module.split("::")
        while parts and parts[0] in ("super", "self"):
            if parts.pop(0) == "super":
                base = base[:-1]
    else:
        # A path that starts with a child module declared here (`use encode::x` in cpu/mod.rs).
        base = [] if module == "crate" else module.split("::")
        if "::".join(base + parts[:1]) not in known and parts[0] not in known:
            return None
        if "::".join(base + parts[:1]) not in known:
            base = []
    full = base + parts
    for end in range(len(full), 0, -1):
        if "::".join(full[:end]) in known:
            return "::".join(full[:end])
    return "crate"


def _shipping() -> dict[str, str]:
    """Module -> its code, for the files the crate builds outside tests (declared
    by a `mod x;` that is not under `#[cfg(test)]`, from lib.rs down)."""
    files = {_module(path): path for path in RUST.rglob("*.rs")}
    code, todo = {}, ["crate"]
    while todo:
        module = todo.pop()
        code[module] = _without_tests(_code(files[module].read_text(encoding="utf-8")))
        for child in re.findall(r"\bmod\s+(\w+)\s*;", code[module]):
            todo.append(child if module == "crate" else f"{module}::{child}")
    return code


def graph() -> dict[str, set[str]]:
    """Source file -> the source files its shipping code names."""
    modules = _shipping()
    known = set(modules) - {"crate"}
    edges = {}
    for module, code in modules.items():
        targets = {_resolve(p, module, known) for p in _paths(code)}
        # A file may use its own folder's mod.rs, which declares it (the folder's shared room).
        edges[module] = {t for t in targets if t and t != module and not module.startswith(f"{t}::")}
    return edges


def _upward(edges: dict[str, set[str]]) -> list[str]:
    """Imports that run up a layer, or across between the two backends."""
    found = []
    for module, targets in edges.items():
        for target in targets:
            a, b = layer(module), layer(target)
            if RANK[b] > RANK[a] or (a != b and RANK[a] == RANK[b] and a != "leaves"):
                found.append(f"{module} ({a}) uses {target} ({b})")
    return sorted(found)


def _seam(edges: dict[str, set[str]]) -> list[str]:
    """`py` reaches nothing below the engine but the leaves' shared types."""
    allowed = {"engine", "py", "error", "layout", "memory", "dlpack", "pool"}
    return sorted(f"{module} uses {target}" for module, targets in edges.items() if layer(module) == "py"
                  for target in targets if layer(target) != "leaves" and layer(target) not in allowed
                  or layer(target) == "leaves" and target.split("::")[0] not in allowed)


def test_the_order_is_the_documented_one() -> None:
    architecture = (RUST.parent / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert ORDER in architecture
    assert set(RANK) - {"crate"} == set(re.findall(r"\w+", ORDER))
    every = {layer(_module(path)) for path in RUST.rglob("*.rs")}
    assert every <= set(RANK) | {"test_texts"}, every - set(RANK)


def test_no_use_runs_back_up_a_layer() -> None:
    assert _upward(graph()) == []


def test_python_classes_reach_the_backends_through_the_engine() -> None:
    assert _seam(graph()) == []


def test_no_uses_close_a_cycle() -> None:
    assert _cycles(graph()) == []


def test_the_checks_see_what_they_check() -> None:
    """The parser finds what a reader finds, and each check catches what it is for."""
    edges = graph()
    assert "engine" in edges["py::tokenizer"] and "cuda::stream" in edges["cuda::pipeline"]
    assert "error" in edges["cuda::jit"] and "kernels" in edges["plan::spm"]
    assert _use_paths("crate::a::{b, c::{d, self}, e as f}") == ["crate::a::b", "crate::a::c::d", "crate::a::c",
                                                                 "crate::a::e"]
    code = _code('let s = "use crate::py;"; // crate::py\n#[cfg(test)]\nmod tests { use crate::py; }\nfn f() {}')
    assert _paths(_without_tests(code)) == []
    assert _upward({"plan::spm": {"cpu::spm"}, "cpu::spm": {"cuda::stream"}}) == [
        "cpu::spm (cpu) uses cuda::stream (cuda)", "plan::spm (plan) uses cpu::spm (cpu)"]
    assert _seam({"py::batch": {"cuda::pipeline", "engine::device", "layout"}}) == ["py::batch uses cuda::pipeline"]
