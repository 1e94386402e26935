"""The command-line layer: thin commands over the library modules."""

from . import (  # noqa: F401  (importing a module registers its commands)
    hook_cmd,
    ledger_cmd,
    meta_cmd,
    ops_cmd,
    peers_cmd,
    requests_cmd,
    watch_cmd,
)
from .app import app, main, run

__all__ = ["app", "main", "run"]
