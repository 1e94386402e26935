"""The type checker's configuration says what it checks (design.md §15): every module of
a part that pyproject.toml's ``[tool.mypy]`` names as strict is in its strict list, so a
new module of that part cannot be left out of the strict checks unnoticed."""

from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's own TOML reader
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "relay_cli"


def _strict_modules() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    strict = [o for o in config["overrides"] if o.get("disallow_untyped_defs")]
    assert len(strict) == 1, "one list of strict modules"
    return set(strict[0]["module"])


def _modules_of(part: str) -> set[str]:
    found = set()
    for path in (PACKAGE / part).rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def test_the_whole_package_is_checked():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["files"] == ["relay_cli"]


def test_a_strict_part_is_strict_in_every_module():
    listed = _strict_modules()
    parts = {m.split(".")[1] for m in listed}
    assert {"core", "store", "requests", "ledger", "agents", "operate", "cli"} <= parts
    for part in sorted(parts):
        assert sorted(_modules_of(part) - listed) == [], f"relay_cli/{part}: not strict"
    every = set().union(*(_modules_of(p) for p in parts))
    assert sorted(listed - every) == [], "a strict module that does not exist"


def _literal(module: object, name: str) -> tuple[str, ...]:
    """The values of the ``Literal`` type ``name`` of ``module``, read from its source: the
    types exist for the type checker only (under ``if TYPE_CHECKING``: a hook starts
    without typing, design.md §18). A name among the values stands for its own values."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(module))  # type: ignore[arg-type]
    found = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [name]
    ]
    assert len(found) == 1, name
    subscript = found[0]
    assert isinstance(subscript, ast.Subscript) and getattr(subscript.value, "id", "") == "Literal"
    items = subscript.slice.elts if isinstance(subscript.slice, ast.Tuple) else [subscript.slice]
    values: list[str] = []
    for item in items:
        if isinstance(item, ast.Name):
            values.extend(_literal(module, item.id))
        else:
            assert isinstance(item, ast.Constant) and isinstance(item.value, str)
            values.append(item.value)
    return tuple(values)


def test_the_literal_types_name_exactly_the_tables_they_type():
    """Error codes, peer kinds and runtime names are ``Literal`` types, so the type checker
    catches a misspelt one (design.md §15); each names exactly what its table holds."""
    from relay_cli.agents import runtimes
    from relay_cli.core import errors, limits

    assert _literal(errors, "ErrorCode") == tuple(errors.ERRORS)
    assert _literal(limits, "RuntimeName") == runtimes.NAMES
    assert _literal(limits, "Kind") == limits.KINDS
