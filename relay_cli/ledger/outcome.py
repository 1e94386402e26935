"""What one call of `relay once` ended with (design.md §7, §10): a typed result that knows
its JSON document, its exit status, its error and the lines it says to a person.

The command line only prints: the document with --json, else a replay's stored output;
then the notes; then the error, if any. Every variant of the document is built here.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Optional

from ..core import clock
from ..core.command import Said
from ..core.errors import RelayError, cannot_start
from ..core.limits import TAIL_BYTES
from ..core.output import inert
from ..core.record import record
from .entries import command_text, decide

if TYPE_CHECKING:
    from relay_cli.core.output import JsonObject

    from .entries import EntryError

# a replay's stored stdout and stderr
Raw = tuple[Optional[bytes], Optional[bytes]]


class Kind(str, enum.Enum):
    """How a call of `relay once` ended."""

    RAN = "ran"  # the command ran now and its outcome is recorded
    REPLAYED = "replayed"  # it ran before: the stored outcome answers
    TIMEOUT = "timeout"  # no person decided within --timeout; nothing ran
    NOT_STARTED = "not_started"  # the command could not start; nothing ran, no entry kept
    INTERRUPTED = "interrupted"  # a signal stopped relay before the command ran
    UNRECORDED = "unrecorded"  # it ran, but the entry changed meanwhile: outcome not recorded
    REFUSED = "refused"  # the ledger refused the call (denied, in_progress, effect_unknown)


@record
class OnceResult:
    """``entry`` is the ledger entry's public object (``entries.entry_object``) as this call
    leaves it, or None when there is none; ``raw`` is a replay's stored stdout and stderr
    bytes, written through for a person."""

    kind: Kind
    exit_code: int
    entry: JsonObject | None
    message: str | None = None
    raw: Raw = (None, None)
    key: str | None = None
    error: RelayError | None = None

    def to_json(self) -> JsonObject:
        """The one JSON document of the call (design.md §7): the entry object, and the
        facts a note would tell a person, as fields."""
        entry = self.entry if self.entry is not None else {"key": self.key}
        if self.kind in (Kind.RAN, Kind.REPLAYED, Kind.NOT_STARTED):
            return entry
        if self.kind is Kind.INTERRUPTED:
            return {**entry, "replayed": False, "interrupted_by_signal": self.exit_code - 128}
        if self.kind is Kind.UNRECORDED:
            return {**entry, "outcome_recorded": False, "warning": self.message}
        return {**entry, "replayed": False}  # TIMEOUT, REFUSED

    def notes(self) -> list[str]:
        """What relay says on stderr to a person (nothing with --json: ``Output.note``)."""
        if self.kind is Kind.INTERRUPTED:
            return [f"relay: {self.message}"]
        if self.kind is Kind.REPLAYED and self.entry is not None:  # (replayed() sets it)
            return [replay_note(self.entry)]
        if self.kind is Kind.UNRECORDED:
            return [f"relay: warning: {inert(self.message)}"]
        return []


def ran(entry: JsonObject, exit_code: int) -> OnceResult:
    return OnceResult(Kind.RAN, exit_code, entry, key=entry["key"])


def replayed(entry: JsonObject, exit_code: int, raw: Raw) -> OnceResult:
    return OnceResult(Kind.REPLAYED, exit_code, entry, raw=raw, key=entry["key"])


def timed_out(key: str, entry: JsonObject | None, timeout_s: float) -> OnceResult:
    error = RelayError(
        "timeout",
        f"no person approved or denied key {key!r} within "
        f"{clock.human_duration(timeout_s)}; the command has not run and the entry still "
        "awaits a decision",
        detail="the same key and command",
    )
    return OnceResult(Kind.TIMEOUT, error.exit_code, entry, key=key, error=error)


def not_started(entry: JsonObject, exit_code: int, message: str) -> OnceResult:
    error = cannot_start(
        message,
        exit_code,
        "nothing ran, so the key stays free; fix the command and call again with the same key",
    )
    return OnceResult(
        Kind.NOT_STARTED, error.exit_code, entry, message, key=entry["key"], error=error
    )


def interrupted(key: str, entry: JsonObject | None, exit_code: int, message: str) -> OnceResult:
    return OnceResult(Kind.INTERRUPTED, exit_code, entry, message, key=key)


def unrecorded(entry: JsonObject, exit_code: int, message: str) -> OnceResult:
    return OnceResult(Kind.UNRECORDED, exit_code, entry, message, key=entry["key"])


def refused(error: EntryError) -> OnceResult:
    """The ledger refused the call (an ``entries.EntryError``, which carries the entry)."""
    return OnceResult(
        Kind.REFUSED, error.exit_code, error.entry, key=error.entry["key"], error=error
    )


# --------------------------------------------------------------------------- a person's lines
def waiting_note(entry: JsonObject) -> Said:
    """What a `once --approve` call says while it waits for a person's decision: the
    commands that decide, each whole on a line of its own (design.md §14)."""
    return Said.of(
        f"relay: key {entry['key']} needs a person's approval; nothing has run yet\n"
        f"  command: {command_text(entry['argv'])}\n"
        f"  cwd:     {entry['cwd']}\n"
        f"  key:     {entry['key']}\n"
        "relay: waiting. A person decides in their own terminal with one of:",
        decide(entry["key"]),
    )


def decided_note(entry: JsonObject) -> str:
    """What a waiting `once --approve` call says when a person approved it."""
    return f"relay: {inert(entry['decided_by'])} approved key {inert(entry['key'])}; running it now"


def replay_note(entry: JsonObject) -> str:
    """What a replay says on stderr: who established the outcome, and what is left of it."""
    key = entry["key"]
    if entry.get("resolution") in ("succeeded", "failed"):
        how = (
            f"was settled as {entry['state']} by {inert(entry['resolved_by'] or '?')} at "
            f"{entry['resolved_at']} (a person's finding"
            + (f": {inert(entry['resolution_note'])}" if entry.get("resolution_note") else "")
            + f"), exit {entry['exit_code']}"
        )
        if entry.get("stdout_bytes") is None:
            how += "; relay never saw the command end"
    else:
        how = (
            f"already ran ({entry['state']}, exit {entry['exit_code']}, finished "
            f"{entry['finished_at']})"
        )
    note = f"relay: replayed: key {inert(key)} {how}; nothing was run now"
    if entry.get("output_pruned"):
        note += (
            f"; its captured output was removed by `relay prune` at "
            f"{entry['output_pruned_at']}, so none is printed"
        )
    else:
        cut = [n for n in ("stdout", "stderr") if entry.get(f"{n}_truncated")]
        if cut:
            note += f"; only the last {TAIL_BYTES // 1024} KiB of {' and '.join(cut)} was kept"
    return note
