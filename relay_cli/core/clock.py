"""The one clock (design.md §8). Everything in relay asks a ``Clock`` what time it is: the
one its call's context carries (``core.context``), or the store's (``store.clock``).

``RELAY_TIME_OFFSET=SECONDS`` (negative or fractional allowed) shifts the clock, so tests
and rehearsals move time instead of sleeping. Times are integer milliseconds since the
epoch inside relay and RFC 3339 UTC with milliseconds and ``Z`` outside.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone

from .errors import RelayError

# The ranges of design.md §6, in seconds: (low, high), and the offset's bound
from .limits import (
    MAX_OFFSET_S,
)
from .record import record, replace

OFFSET_VAR = "RELAY_TIME_OFFSET"
_SECONDS = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?", re.ASCII)


def parse_offset(raw: str) -> float:
    """``RELAY_TIME_OFFSET`` as written -> seconds (0 when empty), or invalid_duration."""
    if not raw:
        return 0.0
    # the whole value in ASCII: float() would also take " 5", "1_0" and "٣٠"
    value = float(raw) if _SECONDS.fullmatch(raw) else math.nan
    if not math.isfinite(value) or abs(value) > MAX_OFFSET_S:
        raise RelayError(
            "invalid_duration",
            f"{OFFSET_VAR} must be a number of seconds within 100 years, not {raw!r}",
        )
    return value


@record(frozen=True)
class Clock:
    """relay's clock, a value (design.md §8): ``source()`` gives the reference time in
    (fractional) ms since the epoch -- this machine's clock unless the store's database
    keeps relay's clock (design.md §13: on PostgreSQL every machine uses the server's
    clock, so machines whose clocks disagree still agree on every deadline) -- and
    ``offset`` is ``RELAY_TIME_OFFSET`` as written, read when the time is first asked
    for (a malformed offset is the command's invalid_duration, not a crash at start).

    A call's context carries its clock; a store opened with it carries the same clock
    with the server as its source. Tests hand a fake one (``Clock(source=...)``, or an
    offset) instead of writing the environment."""

    offset: str = ""
    source: Callable[[], float] | None = None
    # a fake clock keeps its own source even on a store whose server keeps the time
    fixed: bool = False

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Clock:
        """The clock ``RELAY_TIME_OFFSET`` in ``environ`` (a call's: ``core.context``)
        describes."""
        return cls(environ.get(OFFSET_VAR, ""))

    def offset_seconds(self) -> float:
        return parse_offset(self.offset)

    def now_ms(self) -> int:
        if self.source is not None:
            return int(self.source() + self.offset_seconds() * 1000)
        return int((time.time() + self.offset_seconds()) * 1000)

    def with_source(self, source: Callable[[], float]) -> Clock:
        """This clock, reading the time from ``source`` (a store's server) from now on."""
        return self if self.fixed else replace(self, source=source)

    def warning(self) -> str | None:
        """What a person at a terminal is told when ``RELAY_TIME_OFFSET`` shifts the clock.

        The offset is a test knob, but relay applies due transitions with it to the shared
        database (an 8-day offset expires real requests and ends every session), so it is
        never silent on a terminal (design.md §8). Every command warns, also one that does
        not touch the database (`relay id`, `doctor`): the warning is about the variable.
        """
        offset = self.offset_seconds()
        if not offset:
            return None
        way = "ahead" if offset > 0 else "back"
        return (
            f"relay: warning: {OFFSET_VAR}={self.offset.strip()} moves "
            f"relay's clock {human_duration(abs(offset))} {way}; while it is set, relay "
            "commands apply due expiries and lease ends to the shared database by that "
            "clock. Never set it on a home in use: rehearse on a copy "
            "(RELAY_HOME=/tmp/relay-copy)."
        )


def iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    dt = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def parse_iso(text: str) -> int:
    """The inverse of ``iso``. What ``iso`` writes (``2026-01-02T03:04:05.678Z``) is read
    field by field: ``strptime``'s first call imports and sets up its locale tables (~5
    million instructions at every human `relay send`, bench/startup.py). Anything else,
    or a field out of range, goes to ``strptime``, which reads or refuses it as always."""
    dt = None
    if (
        len(text) == 24
        and text[4] == text[7] == "-"
        and text[10] == "T"
        and text[13] == text[16] == ":"
        and text[19] == "."
        and text[23] == "Z"
    ):
        digits = text[:4] + text[5:7] + text[8:10] + text[11:13] + text[14:16] + text[17:19]
        digits += text[20:23]
        if digits.isascii() and digits.isdigit():
            try:
                dt = datetime(
                    int(digits[:4]),
                    int(digits[4:6]),
                    int(digits[6:8]),
                    int(digits[8:10]),
                    int(digits[10:12]),
                    int(digits[12:14]),
                    int(digits[14:]) * 1000,
                    tzinfo=timezone.utc,
                )
            except ValueError:
                dt = None
    if dt is None:
        dt = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    return int(round(dt.timestamp() * 1000))


# the whole value, ASCII digits only: "٣٠s", " 30s" and "30s\n" are not durations
# compiled at first use (re caches it): a call that never needs it never pays for it
_DURATION = r"([0-9]{1,9})([smhd]?)"
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str | int | None, bounds: tuple[int, int], what: str) -> int:
    """``90``, ``90s``, ``15m``, ``2h``, ``7d`` -> seconds within ``bounds``."""
    raw = str(text) if text is not None else ""
    m = re.fullmatch(_DURATION, raw.lower() if raw.isascii() else raw, re.ASCII)
    if not m:
        raise RelayError(
            "invalid_duration",
            f"{what}: {str(text)!r} is not a duration (use 90, 90s, 15m, 2h or 7d)",
        )
    seconds = int(m.group(1)) * _UNIT[m.group(2)]
    low, high = bounds
    if not low <= seconds <= high:
        raise RelayError(
            "invalid_duration",
            f"{what}: {text} is outside {human_duration(low)} to {human_duration(high)}",
        )
    return seconds


def duration_text(seconds: int) -> str:
    """A duration as an option takes it back (``--lease 1h``): exact, in its largest unit."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def span(bounds: tuple[int, int], default: int | None = None) -> str:
    """An option's range (and default) as its help gives it: ``30s-7d, default 1h``. Built
    from the bounds ``parse_duration`` checks, so help and check cannot disagree."""
    text = f"{duration_text(bounds[0])}-{duration_text(bounds[1])}"
    return text if default is None else f"{text}, default {duration_text(default)}"


def human_duration(seconds: float) -> str:
    """The one way relay writes a span of time for a person (design.md §14, also
    ``output.duration``): ``45s``, ``2m``, ``1h59m``, ``2d3h`` -- the largest unit with the
    next one when it is not zero, never ``102s`` or ``119m``. Every relative time
    (``3m ago``, ``in 2m``) and every duration in a sentence uses it."""
    s = int(round(seconds))
    if s < 0:
        return "-" + human_duration(-s)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        h, m = divmod(s // 60, 60)
        return f"{h}h{m}m" if m else f"{h}h"
    d, h = divmod(s // 3600, 24)
    return f"{d}d{h}h" if h else f"{d}d"
