"""No import cycle hides inside a function: a module imports another inside a function
only to keep start-up lean, never to get around a cycle (ledger <-> retention was one)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "relay_cli"

# Known, each with its reason. `relay schema` describes the live command tree, so schema
# must load the CLI, and the commands that print the schema (or its request fields)
# must load schema.
KNOWN = {
    ("relay_cli.schema", "relay_cli.cli"),
    ("relay_cli.cli.meta_cmd", "relay_cli.schema"),
    ("relay_cli.export", "relay_cli.schema"),
}


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _targets(node, package: list[str], known) -> set[str]:
    """The relay_cli modules an import statement names (``from . import x`` may name one)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = (".".join(package[:len(package) - node.level + 1]
                         + ([node.module] if node.module else []))
                if node.level else node.module)
        names = [base, *(f"{base}.{a.name}" for a in node.names)]
    else:
        return set()
    return {n for n in names if n in known}


def _graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(imports at module level, imports inside functions), between relay_cli modules."""
    paths = {_name(p): p for p in PACKAGE.rglob("*.py")}
    top: dict[str, set[str]] = {m: set() for m in paths}
    inner: dict[str, set[str]] = {m: set() for m in paths}
    for mod, path in paths.items():
        package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = [n for n in ast.walk(tree)
                     if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        in_functions = {id(s) for f in functions for s in ast.walk(f)}
        for node in ast.walk(tree):
            (inner if id(node) in in_functions else top)[mod] |= _targets(node, package, paths)
    return top, inner


def _reachable(start: str, edges: dict[str, set[str]]) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in edges[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def test_no_function_level_import_closes_a_cycle():
    top, inner = _graph()
    assert any(inner.values()), "the scan finds imports inside functions"
    every = {m: top[m] | inner[m] for m in top}
    closing = {(a, b) for a in inner for b in inner[a] - top[a]
               if a == b or a in _reachable(b, every)}
    assert closing - KNOWN == set(), "an import inside a function closes a cycle"
    assert KNOWN <= closing, "a known cycle is gone: drop it from KNOWN"
