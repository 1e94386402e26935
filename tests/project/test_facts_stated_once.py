"""Each fact of relay is stated once (design.md §16): a limit or a default is read from
``core/limits.py`` under its own name, never through a module that imported it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "relay_cli"
LIMITS = "relay_cli.core.limits"


def _module(path: Path) -> str:
    parts = ["relay_cli", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path):
    """(dotted module, name, line) of each ``from M import name`` in a file, M resolved."""
    mod = _module(path)
    package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = (
                ".".join(package[: len(package) - node.level + 1] + [node.module or ""]).rstrip(".")
                if node.level
                else node.module or ""
            )
            for alias in node.names:
                yield base, alias, node.lineno


def test_limits_are_read_under_their_own_name():
    files = sorted(PACKAGE.rglob("*.py"))
    # what each module imported from core/limits.py: reading it there is a second name
    passed_on = {
        _module(p): {a.asname or a.name for base, a, _ in _imports(p) if base == LIMITS}
        for p in files
    }
    found = []
    for path in files:
        bound = {}  # a name of this file -> the relay module it is
        for base, alias, line in _imports(path):
            if alias.name in passed_on.get(base, ()):
                found.append(f"{path.name}:{line} from {base} import {alias.name}")
            if f"{base}.{alias.name}" in passed_on:
                bound[alias.asname or alias.name] = f"{base}.{alias.name}"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.attr in passed_on.get(bound.get(node.value.id, ""), ())
            ):
                found.append(f"{path.name}:{node.lineno} {node.value.id}.{node.attr}")
    assert found == [], "import these from core/limits.py"


# Where the request states may be listed: their vocabulary, the per-state tables a new
# state is added to, and the migrations (a CHECK is frozen with the migration that made it).
STATE_LISTS_LIVE_IN = {"core/limits.py", "requests/states.py", "store/migrations.py"}
STATE_LISTS_LIVE_IN |= {"store/pg_migrations.py"}


def _lists_of_states(path: Path, sets: list[set[str]]) -> list[str]:
    """The literals in a file that list one of ``sets`` whole: a tuple, list, set, the keys
    of a dict, or an SQL list in a string (``'queued', 'delivered', 'acknowledged'``)."""
    states = set().union(*sets)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [k for k in node.keys if k is not None]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            for sql in re.findall(r"\('[a-z_]+'(?:, '[a-z_]+')*\)", node.value):
                if set(re.findall(r"'([a-z_]+)'", sql)) in sets:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {sql}")
            continue
        else:
            continue
        named = {i.value for i in items if isinstance(i, ast.Constant) and i.value in states}
        if named in sets:
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {sorted(named)}")
    return found


def test_the_request_states_are_listed_once():
    from relay_cli.core.limits import CLAIMED_STATES, FINAL_STATES, OPEN_STATES, STATES
    from relay_cli.requests.states import MEANING, STATE_STYLES

    assert list(MEANING) == list(STATE_STYLES) == list(STATES)
    found = [
        hit
        for path in sorted(PACKAGE.rglob("*.py"))
        if str(path.relative_to(PACKAGE)) not in STATE_LISTS_LIVE_IN
        for hit in _lists_of_states(
            path, [set(STATES), set(OPEN_STATES), set(FINAL_STATES), set(CLAIMED_STATES)]
        )
    ]
    assert found == [], (
        "name them through core/limits.py's STATES, OPEN_STATES, FINAL_STATES, CLAIMED_STATES"
    )


def test_a_runtime_is_named_where_the_runtime_table_cannot_be_read():
    """A runtime's entry in agents/runtimes.py is read by everything above it; the three
    places that cannot read it name every runtime (agents/runtimes.py says which)."""
    from relay_cli import entry
    from relay_cli.agents import guide, runtimes
    from relay_cli.core.limits import KINDS

    assert set(runtimes.NAMES) <= set(KINDS)
    assert entry.HOOK_RUNTIMES == runtimes.NAMES
    assert set(runtimes.NAMES) <= set(guide._SECTIONS)
