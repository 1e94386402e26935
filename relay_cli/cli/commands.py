"""Every command of the command line, registered on the Typer app (``app``) by importing
its module; the order here is the order of `relay --help`. A call imports this when it
builds its command tree (``call``); a hook's call never does (``hook_call``)."""

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

__all__ = ["app"]
