"""The options every command shares (``--json``, ``--home``, ``--as``, ``--session``,
``--state``, ``--kind``, ``--lease``) and the parsing of their values (a whole number, a
duration), for the commands of ``cli`` to declare alike."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, List, Optional, overload

import typer

from ..core import clock
from ..core.errors import RelayError
from ..core.limits import (
    DEFAULT_HUMAN_SESSION_LEASE_S,
    DEFAULT_SESSION_LEASE_S,
    KINDS,
    SESSION_LEASE,
    STATES,
)
from ..requests import validate
from ..requests.peers import (
    validate_kind,
)
from . import click_seam, complete
from .click_seam import Choice

if TYPE_CHECKING:
    from .click_seam import ClickContext, Parameter


JsonOpt = Annotated[bool, typer.Option("--json", help="Print exactly one JSON document on stdout.")]


HomeOpt = Annotated[
    Optional[str],
    typer.Option(
        "--home",
        metavar="PATH",
        help="State directory (default: $RELAY_HOME, else the per-user state dir).",
    ),
]


def PeerOpt(flag: str, help: str, metavar: str = "PEER") -> Any:  # noqa: N802 (an Option, like typer's)
    """An option that names a peer; shell completion offers the known names."""
    return typer.Option(flag, metavar=metavar, help=help, autocompletion=complete.peers)


AsOpt = Annotated[
    Optional[str],
    PeerOpt("--as", "Who is calling (default: $RELAY_PEER).", "NAME"),
]


SessionOpt = Annotated[
    Optional[str],
    typer.Option(
        "--session",
        metavar="TOKEN",
        help="Session token from `peers join` (default: $RELAY_SESSION).",
    ),
]


class WholeNumber(click_seam.ParamType):
    """An integer option written with the ASCII digits 0-9 only, as every other value relay
    reads in ASCII (design.md §6): Python's ``int`` would also take other scripts' digits
    ('٣'), spaces and underscores. ``low``/``high`` bound it; a refusal is usage_error."""

    name = "integer"

    def __init__(self, option: str, low: int | None = None, high: int | None = None) -> None:
        self.option, self.low, self.high = option, low, high

    def convert(self, value: object, param: Parameter | None, ctx: ClickContext | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            text = str(value)
            if not (text.isascii() and text.isdigit() and len(text) <= 18):
                raise RelayError(
                    "usage_error",
                    f"{self.option} takes a whole number written with the digits 0-9, not {text!r}",
                )
            number = int(text)
        if (self.low is not None and number < self.low) or (
            self.high is not None and number > self.high
        ):
            raise RelayError(
                "usage_error", f"{self.option} must be {self.low} to {self.high}, not {number}"
            )
        return number


StatesOpt = Annotated[
    Optional[List[str]],
    typer.Option(
        "--state",
        metavar="STATE",
        click_type=Choice(STATES, validate.validate_state),
        help=f"Only requests in STATE (repeatable): {', '.join(STATES)}.",
    ),
]


KindOpt = Annotated[
    Optional[str],
    typer.Option(
        "--kind",
        click_type=Choice(KINDS, validate_kind),
        show_default=False,
        help="What runs under this name (default other).",
    ),
]


SessionLeaseOpt = Annotated[
    Optional[str],
    typer.Option(
        "--lease",
        metavar="D",
        help=f"Session lease ({clock.span(SESSION_LEASE, DEFAULT_SESSION_LEASE_S)}; "
        f"{clock.duration_text(DEFAULT_HUMAN_SESSION_LEASE_S)} for --kind human).",
    ),
]


@overload
def duration(value: str | None, bounds: tuple[int, int], what: str, default: int) -> int: ...


@overload
def duration(
    value: str | None, bounds: tuple[int, int], what: str, default: None
) -> int | None: ...


def duration(
    value: str | None, bounds: tuple[int, int], what: str, default: int | None
) -> int | None:
    """The option's duration in seconds (``default`` when it is not given)."""
    if value is None:
        return default
    return clock.parse_duration(value, bounds, what)
