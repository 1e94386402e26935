"""psycopg2's import (design.md §13): the first time a PostgreSQL URL is used, never at
start-up. ``pg.driver`` connects with it (and sets relay's wait callback), and
``url.read`` asks libpq through it what a URL means.

Two parts of the import cost more than the rest of a call's work and are not used:
psycopg2.extras (it pulls in logging, ipaddress, ...) is not imported at all, and the
``ssl`` module psycopg2 imports only to hand libcrypto's thread-locking set-up to Python
(needed by OpenSSL before 1.1; psycopg2 falls back to libpq's own set-up without it, and
psycopg2-binary carries its own libssl that Python's does not touch) is kept out during
the import: TLS is libpq's, unchanged.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import RelayError

INSTALL = "pip install 'relay-cli[postgres]'"

_loaded: Any = None  # psycopg2, once imported (a module, which mypy types as Any)


def load() -> Any:
    """psycopg2 (with relay's type casts: pg_driver.py); without it, storage_error with
    the install line."""
    global _loaded
    if _loaded is not None:
        return _loaded
    import sys

    # (None in sys.modules makes an import of it fail, as Python documents; typeshed types
    # the mapping's values as modules only)
    blocked = (
        "ssl" not in sys.modules and sys.modules.setdefault("ssl", None) is None  # type: ignore[arg-type]
    )
    try:
        import psycopg2.extensions

        from . import pg_driver  # noqa: F401 - registers relay's type casts
    except ImportError as e:
        raise RelayError(
            "storage_error",
            "a PostgreSQL database URL is set, but the PostgreSQL driver is not installed",
            detail=f"install it with: {INSTALL}",
        ) from e
    finally:
        if blocked and sys.modules.get("ssl", 0) is None:
            del sys.modules["ssl"]
    _loaded = psycopg2
    return psycopg2
