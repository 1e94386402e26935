"""The store is a declared interface (relay_cli/store/api.py's ``Store``, design.md §13):
both backends implement exactly it, and the library asks nothing else of a store."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from relay_cli.store.api import Store
from relay_cli.store.base import SQLiteStore
from relay_cli.store.pg_store import PgStore

PACKAGE = Path(__file__).resolve().parent.parent / "relay_cli"


def _declared() -> set[str]:
    names = set()
    for klass in Store.__mro__:
        if klass in (Store,) or klass.__module__ == Store.__module__:
            names |= {n for n in vars(klass) if not n.startswith("_")}
            names |= set(getattr(klass, "__annotations__", {}))
    return names


def _public(klass) -> set[str]:
    return ({n for n in dir(klass) if not n.startswith("_")} | {"home"}) - {"db"}


@pytest.mark.one_backend
@pytest.mark.parametrize("klass", [SQLiteStore, PgStore])
def test_each_backend_implements_exactly_the_declared_store(klass):
    assert _public(klass) == _declared()
    for name in _declared() - {"backend", "poll_interval", "home", "read_only"}:
        want = inspect.signature(getattr(Store, name))
        got = inspect.signature(getattr(klass, name))
        assert list(got.parameters) == list(want.parameters), (klass.__name__, name)


def _asked_of_a_store() -> dict[str, set[str]]:
    """Every attribute read off something named ``store`` outside relay_cli/store."""
    asked: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if "store" in path.relative_to(PACKAGE).parts[:-1]:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Attribute):
                continue
            owner = node.value
            named = (owner.id if isinstance(owner, ast.Name) else
                     owner.attr if isinstance(owner, ast.Attribute) else None)
            if named in ("store", "_store"):
                asked.setdefault(node.attr, set()).add(path.name)
    return asked


@pytest.mark.one_backend
def test_the_library_asks_a_store_only_what_it_declares():
    asked = _asked_of_a_store()
    assert "get_request" in asked  # (the scan finds the library's calls)
    undeclared = {name: where for name, where in asked.items() if name not in _declared()}
    assert not undeclared, undeclared
