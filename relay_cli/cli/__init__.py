"""The command line: thin Typer commands over the library parts, the shell completion
(``complete``) and `relay schema`, which describes the live command tree (``schema``).

Importing a module registers its commands; the order here is the order of `relay --help`.

May import: ``core``, ``store``, ``requests``, ``ledger``, ``agents`` and ``operate``.
"""

from . import requests_cmd  # noqa: F401  (the request lifecycle first)

# isort: split
from . import peers_cmd  # noqa: F401

# isort: split
from . import (  # noqa: F401
    db_cmd,
    demo_cmd,
    hook_cmd,
    ledger_cmd,
    meta_cmd,
    notify_cmd,
    ops_cmd,
    watch_cmd,
    web_cmd,
)
from .app import app
from .call import main, run

__all__ = ["app", "main", "run"]
