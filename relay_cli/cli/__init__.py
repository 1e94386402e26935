"""The command-line layer: thin commands over the library modules.

Importing a module registers its commands; the order here is the order of `relay --help`.
"""

from . import requests_cmd  # noqa: F401  (the request lifecycle first)

# isort: split
from . import peers_cmd  # noqa: F401

# isort: split
from . import (  # noqa: F401
    db_cmd,
    hook_cmd,
    ledger_cmd,
    meta_cmd,
    ops_cmd,
    watch_cmd,
)
from .app import app, main, run

__all__ = ["app", "main", "run"]
