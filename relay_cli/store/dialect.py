"""The few spellings in which relay's statements differ between SQLite and PostgreSQL,
each written once per backend (design.md §13). The SQL of sql_*.py is otherwise the same
text on both; a store's ``_sql`` is its backend's dialect. PostgreSQL's placeholders
(``%s`` for ``?``, ``%(name)s`` for ``:name``) are the one mechanical change left to
its connection (pg.py).
"""

from __future__ import annotations


class Dialect:
    """What a backend spells its own way: a store's ``_sql`` is a subclass (the class
    itself, never an instance), one per backend."""

    name: str
    greatest: str  # the larger of two values: ``{greatest}(a, b)``

    @staticmethod
    def indexed_by(index: str) -> str:
        """An index hint after a table's name, or nothing."""
        raise NotImplementedError

    @staticmethod
    def same_as(mark: str) -> str:
        """Equal, NULL included (NULL matches NULL)."""
        raise NotImplementedError

    @staticmethod
    def json_values(mark: str) -> str:
        """A subquery of the strings in the JSON array ``mark``."""
        raise NotImplementedError


class SQLite(Dialect):
    name = "sqlite"

    @staticmethod
    def indexed_by(index: str) -> str:
        """An index hint: without statistics SQLite's planner may pick a worse index
        (docs/benchmarks.md)."""
        return f"INDEXED BY {index}"

    greatest = "max"  # max(a, b) of two values

    @staticmethod
    def same_as(mark: str) -> str:
        return f"IS {mark}"

    @staticmethod
    def json_values(mark: str) -> str:
        return f"SELECT value FROM json_each({mark})"


class PostgreSQL(Dialect):
    name = "postgresql"

    @staticmethod
    def indexed_by(index: str) -> str:
        return ""  # the planner chooses (ANALYZE keeps its statistics)

    greatest = "GREATEST"

    @staticmethod
    def same_as(mark: str) -> str:
        return f"IS NOT DISTINCT FROM {mark}"

    @staticmethod
    def json_values(mark: str) -> str:
        return f"SELECT json_array_elements_text({mark})"
