"""The Python package's layering holds without a reviewer: every import of
python/gpu_tok (read with `ast`, including those inside functions and under
TYPE_CHECKING) points down the rooms' order, no imports close a cycle, and
only the core room imports the native module `_core`.

The order is written here and in docs/ARCHITECTURE.md (the test checks that
the two agree): core <- compat <- {serve, corpus, integrations, tools} <- cli.
Rooms of one rank may import each other (the integrations use the corpus
room's documents), never in a cycle. The package's `__init__` (the public
names) and the old paths kept as aliases of moved modules stand above them all.
"""

from __future__ import annotations

import ast
from pathlib import Path

import gpu_tok

ORDER = "core <- compat <- {serve, corpus, integrations, tools} <- cli"
RANK = {"core": 0, "compat": 1, "serve": 2, "corpus": 2, "integrations": 2, "tools": 2, "cli": 3, "facade": 4}
PACKAGE = Path(gpu_tok.__file__).parent
NATIVE = "gpu_tok._core"


def _is_alias(tree: ast.Module) -> bool:
    """An old path kept for users: `alias(__name__, "gpu_tok.new.path")`."""
    return any(isinstance(node, ast.Call) and getattr(node.func, "id", None) == "alias"
               for node in ast.walk(tree))


def _modules() -> dict[str, tuple[Path, ast.Module]]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found[".".join(parts)] = (path, ast.parse(path.read_text(encoding="utf-8")))
    return found


def room(module: str, tree: ast.Module | None) -> str:
    parts = module.split(".")
    if module == "gpu_tok" or (tree is not None and _is_alias(tree)):
        return "facade"
    if parts[1] in RANK:  # a room's package and its modules
        return parts[1]
    return "cli" if parts[1] in ("cli", "__main__") else "core"


def _imports(module: str, path: Path, tree: ast.Module, known: set[str]) -> set[str]:
    """The package's modules that `module` imports (`from .. import x` names
    the module x when there is one, else the package)."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("gpu_tok")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("gpu_tok"):
                continue
            for alias in node.names:
                name = f"{target}.{alias.name}"
                found.add(name if name in known or name == NATIVE else target)
    found.discard(module)
    return found


def _graph() -> tuple[dict[str, set[str]], dict[str, str]]:
    modules = _modules()
    known = set(modules)
    graph = {name: _imports(name, path, tree, known) for name, (path, tree) in modules.items()}
    rooms = {name: room(name, tree) for name, (_, tree) in modules.items()}
    return graph, rooms


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in graph:
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_order_is_the_documented_one() -> None:
    architecture = (Path(__file__).parent.parent / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert ORDER in architecture
    assert set(RANK) - {"facade"} == set(ORDER.replace("<-", " ").replace("{", " ").replace("}", " ")
                                         .replace(",", " ").split())


def test_every_module_has_a_known_room() -> None:
    _, rooms = _graph()
    assert set(rooms.values()) <= set(RANK), {m: r for m, r in rooms.items() if r not in RANK}
    assert {"core", "compat", "serve", "corpus", "integrations", "tools", "cli"} <= set(rooms.values())


def test_no_import_runs_back_up_a_layer() -> None:
    graph, rooms = _graph()
    upward = sorted(f"{module} ({rooms[module]}) imports {target} ({rooms[target]})"
                    for module, targets in graph.items() for target in targets
                    if target in rooms and RANK[rooms[target]] > RANK[rooms[module]])
    assert upward == []


def test_no_imports_close_a_cycle() -> None:
    graph, _ = _graph()
    assert _cycles(graph) == []


def test_only_the_core_room_imports_the_native_module() -> None:
    graph, rooms = _graph()
    outside = sorted(module for module, targets in graph.items() if NATIVE in targets and rooms[module] != "core")
    assert outside == []


def test_the_checks_see_what_they_check() -> None:
    """The graph is not empty and the checks catch what they are for."""
    graph, rooms = _graph()
    assert "gpu_tok._state" in graph["gpu_tok.compat.tokenizer"]
    assert NATIVE in graph["gpu_tok._state"]
    assert "gpu_tok.serve.binary" in graph["gpu_tok.serve.app"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert rooms["gpu_tok.tokenizer"] == "facade" and rooms["gpu_tok.compat._pad"] == "compat"
