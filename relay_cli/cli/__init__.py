"""The command line: thin Typer commands over the library parts (``commands`` registers
them all on ``app``), the entry point that runs a call (``call``: ``main``, ``run``), a
hook's call, which starts without Typer (``hook_call``), the shell completion
(``complete``) and `relay schema`, which describes the live command tree (``schema``).

Importing this package imports nothing else: a call pays only for what it uses (a hook
runs on every turn of an agent; design.md §18). ``main`` and ``run`` are ``call``'s; the
Typer app with every command is ``commands.app``.

May import: ``core``, ``store``, ``requests``, ``ledger``, ``agents`` and ``operate``.
"""

from __future__ import annotations

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)
if TYPE_CHECKING:
    from typing import Any


if TYPE_CHECKING:
    from .call import main, run

__all__ = ["main", "run"]


def __getattr__(name: str) -> Any:
    if name in ("main", "run"):
        from . import call

        return getattr(call, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
