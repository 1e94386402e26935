"""psycopg2 as the PostgreSQL backend uses it (design.md §13): imported by
``pg_load.load`` only, the first time a PostgreSQL URL is used (never at start-up), with
the ``ssl`` module kept out of that import (see pg_load.py).

Importing it registers relay's two type casts with psycopg2: BYTEA as bytes (like
SQLite's BLOB), not memoryview; NUMERIC (what sum() of integers gives) as int when it
is whole. ``RelayConnection`` and ``RelayCursor`` are what ``pg.PgConnection`` opens;
the cursor gives its rows as ``Row``s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Iterable, SupportsIndex, overload

import psycopg2
import psycopg2.extensions as ext

if TYPE_CHECKING:
    from . import api


class Row(tuple[Any, ...]):
    """A result row as relay's shared code reads one (like sqlite3.Row): by position
    or by column name, ``keys()``, and ``dict(row)``. A subclass per column list holds
    the names (``row_class``)."""

    __slots__ = ()
    _index: ClassVar[dict[str, int]] = {}

    @overload
    def __getitem__(self, key: SupportsIndex | str) -> Any: ...
    @overload
    def __getitem__(self, key: slice) -> tuple[Any, ...]: ...
    def __getitem__(self, key: SupportsIndex | str | slice) -> Any:
        if isinstance(key, str):
            key = self._index[key]
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._index)


_row_classes: dict[tuple[str, ...], type[Row]] = {}


def row_class(description: Iterable[ext.Column] | None) -> type[Row]:
    """The ``Row`` class of a statement's columns (its cursor's ``description``)."""
    names = tuple(d[0] for d in description or ())
    cls = _row_classes.get(names)
    if cls is None:
        cls = _row_classes[names] = type(
            "Row", (Row,), {"__slots__": (), "_index": {n: i for i, n in enumerate(names)}}
        )
    return cls


def _bytes(value: str | bytes | None, cur: ext.cursor | None) -> bytes | None:
    return None if value is None else bytes(psycopg2.BINARY(value, cur))


def _numeric(value: str | bytes | None, cur: ext.cursor | None) -> int | float | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else value.decode()  # (psycopg2 gives a str)
    return int(text) if text.lstrip("-").isdigit() else float(text)


ext.register_type(ext.new_type(psycopg2.BINARY.values, "RELAY_BYTES", _bytes))
ext.register_type(ext.new_type((1700,), "RELAY_NUMERIC", _numeric))


class RelayConnection(ext.connection):
    """relay's connection: what the wait callback (``pg._wait``) needs is its own."""

    relay_deadline: float | None = None  # when the statement running now gives up
    relay_interrupted = False  # a Ctrl-C arrived while a statement was on its way

    def __init__(self, dsn: str, *args: Any, connecting_until: float = 0.0, **kw: Any) -> None:
        self.relay_connecting_until = connecting_until  # when connecting gives up
        super().__init__(dsn, *args, **kw)


class RelayCursor(ext.cursor):
    """Rows as ``Row``s (fetchmany and fetchall give them typed as the tuples they are)."""

    def fetchone(self) -> Row | None:
        row = super().fetchone()
        return None if row is None else row_class(self.description)(row)

    def fetchmany(self, size: int | None = None) -> list[tuple[Any, ...]]:
        rows = super().fetchmany(self.arraysize if size is None else size)
        return [row_class(self.description)(r) for r in rows] if rows else rows

    def rows(self) -> list[api.Row]:
        """The rest of the rows (``fetchall``) as ``Row``s."""
        rows = super().fetchall()
        if not rows:
            return []
        cls = row_class(self.description)
        return [cls(r) for r in rows]

    def fetchall(self) -> list[tuple[Any, ...]]:
        rows = super().fetchall()
        if not rows:
            return rows
        cls = row_class(self.description)
        return [cls(r) for r in rows]

    def __next__(self) -> Row:
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row
