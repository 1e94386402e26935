"""The package's folders are its architecture (design.md §16): each part of relay lives in
one subpackage, and a part imports only its own modules and the parts below it:

    entry  ->  cli  ->  operate  ->  agents  ->  ledger  ->  requests  ->  store  ->  core

Imports inside functions (kept there for start-up time) count like any other, and no
import cycle exists anywhere, within a part or across parts: there is no allow-list.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "relay_cli"

# Lowest first. The package root holds only the version; the entry points sit on top.
LAYERS = ["core", "store", "requests", "ledger", "agents", "operate", "cli", "entry"]
ENTRY = {"relay_cli.entry", "relay_cli.__main__"}


def _name(path: Path) -> str:
    parts = ["relay_cli", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_name(p): p for p in PACKAGE.rglob("*.py")}


def _targets(node, package: list[str], known) -> set[str]:
    """The relay_cli modules an import statement names (``from . import x`` may name one)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = (
            ".".join(
                package[: len(package) - node.level + 1] + ([node.module] if node.module else [])
            )
            if node.level
            else node.module
        )
        names = [
            n
            for a in node.names
            for n in ([f"{base}.{a.name}"] if f"{base}.{a.name}" in known else [base])
        ]
    else:
        return set()
    return {n for n in names if n in known}


def _graph() -> dict[str, set[str]]:
    """Every import between relay_cli modules, at module level or inside a function."""
    paths = _modules()
    edges: dict[str, set[str]] = {}
    for mod, path in paths.items():
        package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        edges[mod] = {t for node in ast.walk(tree) for t in _targets(node, package, paths)}
        edges[mod].discard(mod)
    return edges


def _layer(mod: str) -> int:
    if mod in ENTRY:
        return LAYERS.index("entry")
    if mod == "relay_cli":
        return LAYERS.index("core")  # the version string only
    return LAYERS.index(mod.split(".")[1])


def test_every_module_lives_in_a_part():
    loose = [
        m
        for m in _modules()
        if m not in ENTRY and m != "relay_cli" and m.split(".")[1] not in LAYERS
    ]
    assert loose == [], "a module outside the parts: move it into the part that owns it"
    assert (PACKAGE / "__init__.py").read_text().count("\n") < 5  # the version, nothing else


def test_each_part_says_what_it_owns_and_what_it_may_import():
    for part in LAYERS[:-1]:
        doc = ast.get_docstring(ast.parse((PACKAGE / part / "__init__.py").read_text()))
        assert doc and "May import" in doc, f"relay_cli/{part}/__init__.py"
        below = LAYERS[: LAYERS.index(part)]
        for name in below:
            assert f"``{name}``" in doc or part == "core", (part, name)


def test_no_part_imports_a_part_above_it():
    upward = sorted(
        (a, b) for a, targets in _graph().items() for b in targets if _layer(b) > _layer(a)
    )
    assert upward == []


def test_no_import_cycle_anywhere():
    edges = _graph()
    assert any(edges.values()), "the scan finds imports"
    # Tarjan's strongly connected components: any component of two or more is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    assert cycles == []
