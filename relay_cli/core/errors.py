"""The error taxonomy (design.md §7): every failure relay reports is one of these codes.

Each code has one exit status (``ExitStatus``, the enum of every status relay gives),
one retryable flag and one fixed hint that tells an agent what to do next. Raising an error anywhere is one line: ``raise RelayError("busy")``.
"""

from __future__ import annotations

from enum import IntEnum

from .command import NO_SCOPE, Choices, Said, Scope, relay, said
from .limits import (
    DRAFT_TTL_S,
    KINDS,
    MAX_DEPTH,
    MAX_OPEN_DRAFTS,
    MAX_TEXT_BYTES,
    MIN_PREFIX,
    NAME_PATTERN,
    QUEUE_CAP,
)
from .record import record


class ExitStatus(IntEnum):
    """Every exit status relay gives (design.md §7), with what it means where `relay schema`
    lists it (``meaning``; the others are the shell's, or given with their own ``when``)."""

    meaning: str | None  # (an attribute of each member, not a member)

    def __new__(cls, value: int, meaning: str | None = None) -> ExitStatus:
        member = int.__new__(cls, value)
        member._value_ = value
        member.meaning = meaning
        return member

    def __str__(self) -> str:  # "75" in any text, as on Python 3.11+
        return str(int(self))

    OK = 0, "ok"
    INTERNAL = 1, "internal error (a bug in relay)"
    USAGE = 2, "usage or invalid input"
    NOT_FOUND = 3, "not found"
    CONFLICT = 4, "conflict"
    IDENTITY = 5, "identity or ownership"
    LIMIT = 6, "limit"
    UNSAFE = 7, "unsafe or unreadable state"
    FINAL_FAILURE = (
        10,
        ("`wait`: failed, rejected, expired or cancelled; `once`: denied by a person"),
    )
    UNKNOWN = 11, "`wait`: delivery_unknown; `once`: effect unknown"
    NOT_YET = 75, "not yet or busy: retryable (a timeout is not a failure)"
    # as a shell exits when a command cannot run (``ErrorSpec.also_exits`` says when)
    NOT_EXECUTABLE = 126
    COMMAND_NOT_FOUND = 127
    # killed by SIGINT (Ctrl-C) or SIGPIPE (the reader went away), as a shell reports it
    INTERRUPTED = 130
    BROKEN_PIPE = 141


@record(frozen=True)
class ErrorSpec:
    exit_code: int
    retryable: bool
    # prose, its commands as values: rendered with the call's scope flags (design.md §14)
    said_hint: str | Said
    # Other exit statuses the code is reported with, each with when: (status, when).
    also_exits: tuple[tuple[int, str], ...] = ()

    @property
    def hint(self) -> str:
        """The hint as one line of text, its commands without scope flags (as `relay
        schema` and the reference list it)."""
        return said(self.said_hint).text()


# `relay run` and `relay once` start a command. When it cannot start, relay reports
# usage_error (the command line names a program that cannot run) but exits as a shell
# does, so a caller that knows the shell's convention reads it the same (design.md §7).
NOT_FOUND_EXIT = ExitStatus.COMMAND_NOT_FOUND
NOT_EXECUTABLE_EXIT = ExitStatus.NOT_EXECUTABLE

# Every error code (design.md §7), as a type: a misspelt code is a type error, and a test
# keeps it equal to ERRORS' keys.
TYPE_CHECKING = False  # (typing's, without importing typing: design.md §18)
if TYPE_CHECKING:
    from typing import Any, Literal

    ErrorCode = Literal[
        "usage_error",
        "invalid_id",
        "invalid_text",
        "invalid_name",
        "invalid_duration",
        "invalid_key",
        "ambiguous_id",
        "self_message",
        "request_not_found",
        "unknown_peer",
        "prepared_not_found",
        "ledger_key_not_found",
        "request_id_conflict",
        "reply_conflict",
        "state_conflict",
        "prepared_expired",
        "key_conflict",
        "no_identity",
        "session_required",
        "peer_superseded",
        "lease_expired",
        "invalid_session",
        "not_owner",
        "approval_needs_terminal",
        "text_too_large",
        "capacity_exceeded",
        "rate_limited",
        "depth_exceeded",
        "unsafe_state_dir",
        "schema_too_new",
        "database_corrupt",
        "storage_error",
        "denied",
        "effect_unknown",
        "timeout",
        "nothing_to_claim",
        "busy",
        "in_progress",
        "database_unavailable",
        "internal_error",
    ]

ERRORS: dict[ErrorCode, ErrorSpec] = {
    # 2: usage / invalid input
    "usage_error": ErrorSpec(
        ExitStatus.USAGE,
        False,
        "the command cannot run as given; the message names what is wrong (an option or "
        "argument, a file, directory or program it names, standard input): fix that and "
        "run it again (--help lists the command's options)",
        also_exits=(
            (NOT_FOUND_EXIT, "`run` and `once`: the command was not found (as a shell exits)"),
            (
                NOT_EXECUTABLE_EXIT,
                "`run` and `once`: the command cannot be executed (as a shell exits)",
            ),
        ),
    ),
    "invalid_id": ErrorSpec(
        ExitStatus.USAGE,
        False,
        Said.of(
            "ids are UUIDs (",
            relay("id", scoped=False),
            " prints a new one); a command that names an existing "
            f"request also takes a unique prefix of at least {MIN_PREFIX} characters; a retry passes the same "
            "id again",
        ),
    ),
    "invalid_text": ErrorSpec(
        ExitStatus.USAGE,
        False,
        f"text must be UTF-8, 1 to {MAX_TEXT_BYTES} bytes, not only whitespace, without NUL "
        "bytes; pass it on stdin with `-`",
    ),
    "invalid_name": ErrorSpec(
        ExitStatus.USAGE,
        False,
        f"peer names match ^{NAME_PATTERN}$ and kinds are {', '.join(KINDS[:-1])} or {KINDS[-1]}",
    ),
    "invalid_duration": ErrorSpec(
        ExitStatus.USAGE,
        False,
        "durations look like 90, 90s, 15m, 2h or 7d and must lie in the option's range "
        "(see --help)",
    ),
    "invalid_key": ErrorSpec(
        ExitStatus.USAGE,
        False,
        "a key is 1 to 200 printable ASCII characters (! to ~), e.g. the tool call's id",
    ),
    "ambiguous_id": ErrorSpec(
        ExitStatus.USAGE,
        False,
        "several requests start with this prefix; give more characters of the id, "
        "or the full id (the candidates follow)",
    ),
    "self_message": ErrorSpec(
        ExitStatus.USAGE,
        False,
        Said.of("you cannot send to yourself; pick another peer (", relay("peers", "list"), ")"),
    ),
    # 3: not found
    "request_not_found": ErrorSpec(
        ExitStatus.NOT_FOUND,
        False,
        Said.of("no request has this id; check the id, or ", relay("list"), " to see requests"),
    ),
    "unknown_peer": ErrorSpec(
        ExitStatus.NOT_FOUND,
        False,
        "send only to known peers; a peer becomes known with `relay peers join` or "
        "`relay peers add`",
    ),
    "prepared_not_found": ErrorSpec(
        ExitStatus.NOT_FOUND,
        False,
        "no draft and no request has this id here: relay checked both, so even if an "
        "earlier submit's response was lost, nothing was queued under it in this home or "
        "database; check the id and the home (--home, RELAY_HOME), or prepare the work again",
    ),
    "ledger_key_not_found": ErrorSpec(
        ExitStatus.NOT_FOUND,
        False,
        Said.of("no ledger entry has this key; ", relay("ledger", "list"), " shows the keys"),
    ),
    # 4: conflict
    "request_id_conflict": ErrorSpec(
        ExitStatus.CONFLICT,
        False,
        "this id was used for different content; a retry must resend exactly the same "
        "content, new work needs a new id",
    ),
    "reply_conflict": ErrorSpec(
        ExitStatus.CONFLICT,
        False,
        "this request was already completed with a different reply; `relay show ID` "
        "shows it, and it cannot be replaced",
    ),
    "state_conflict": ErrorSpec(
        ExitStatus.CONFLICT,
        False,
        "it is not in a state that allows this; `relay show ID --events` (a request) or "
        "`relay ledger show KEY` (a ledger key) shows its state and history",
    ),
    "prepared_expired": ErrorSpec(
        ExitStatus.CONFLICT,
        False,
        "the draft expired before it was submitted, and no request has its id (relay "
        "checked, so a lost submit response queued nothing); prepare the work again",
    ),
    "key_conflict": ErrorSpec(
        ExitStatus.CONFLICT,
        False,
        "this key was used for a different command or directory; a retry must run exactly "
        "the same command in the same directory, a new action needs a new key",
    ),
    # 5: identity or ownership
    "no_identity": ErrorSpec(
        ExitStatus.IDENTITY,
        False,
        'say who you are: eval "$(relay peers join NAME --shell)" sets RELAY_PEER and '
        "RELAY_SESSION in this shell, or pass --as NAME (a person or script without a session)",
    ),
    "session_required": ErrorSpec(
        ExitStatus.IDENTITY,
        False,
        "this needs the name's live session token: pass --session or set RELAY_SESSION; "
        'eval "$(relay peers join NAME --shell)" starts a session in this shell (it replaces a '
        "live one of that name)",
    ),
    "peer_superseded": ErrorSpec(
        ExitStatus.IDENTITY,
        False,
        "a newer session of this peer exists; this session may only read and retry "
        "existing sends; if you are the live agent, join again in this shell with "
        'eval "$(relay peers join NAME --shell)" (it replaces the newer session)',
    ),
    "lease_expired": ErrorSpec(
        ExitStatus.IDENTITY,
        False,
        "the session's lease lapsed and its in-flight work became delivery_unknown; join "
        'again in this shell with eval "$(relay peers join NAME --shell)" (a longer --lease, '
        "`relay peers heartbeat` or `relay run` keeps a session alive)",
    ),
    "invalid_session": ErrorSpec(
        ExitStatus.IDENTITY,
        False,
        "this session token is unknown or its session has left; join again in this shell "
        'with eval "$(relay peers join NAME --shell)"',
    ),
    "not_owner": ErrorSpec(
        ExitStatus.IDENTITY,
        False,
        "only the recipient's claiming session may ack/reply/fail/reject, only the "
        "sender may cancel or submit; check --as/--session",
    ),
    "approval_needs_terminal": ErrorSpec(
        ExitStatus.IDENTITY,
        False,
        "approve, deny and resolve are a person's decisions: ask the person to run this "
        "command in their own terminal",
    ),
    # 6: limit
    "text_too_large": ErrorSpec(
        ExitStatus.LIMIT,
        False,
        f"text is limited to {MAX_TEXT_BYTES} bytes, also with --file; shorten it, or "
        "write the content to a file and send its path as the text",
    ),
    "capacity_exceeded": ErrorSpec(
        ExitStatus.LIMIT,
        True,
        f"a queue is full: at most {QUEUE_CAP} open requests per recipient (by "
        f"default) or {MAX_OPEN_DRAFTS} unsubmitted drafts per sender (they expire after "
        f"{DRAFT_TTL_S // 3600} h); nothing was queued; wait retry_after_seconds, then retry "
        "with the same id and content",
    ),
    "rate_limited": ErrorSpec(
        ExitStatus.LIMIT,
        True,
        "too many new requests in the last minute; wait retry_after_seconds, then retry "
        "with the same id and content",
    ),
    "depth_exceeded": ErrorSpec(
        ExitStatus.LIMIT,
        False,
        f"the in_reply_to chain is deeper than {MAX_DEPTH}; ask the person before "
        "continuing the chain",
    ),
    # 7: unsafe or unreadable state
    "unsafe_state_dir": ErrorSpec(
        ExitStatus.UNSAFE,
        False,
        Said.of(
            "the state directory must be a real directory (not a symlink) owned by you with "
            "mode 0700; ",
            relay("doctor"),
            " explains and names the fix (its --fix sets the modes of a home relay made, "
            "never of another directory)",
        ),
    ),
    "schema_too_new": ErrorSpec(
        ExitStatus.UNSAFE,
        False,
        "this database was written by a newer relay; upgrade relay, do not downgrade the database",
    ),
    "database_corrupt": ErrorSpec(
        ExitStatus.UNSAFE,
        False,
        Said.of(
            "relay.db is not a readable relay database; nothing was changed; move it aside "
            "and ask the person, ",
            relay("doctor"),
            " reports details",
        ),
    ),
    "storage_error": ErrorSpec(
        ExitStatus.UNSAFE,
        False,
        "relay could not use its database (disk full, read-only, I/O error, access "
        "refused, or a missing driver); nothing was half-written; fix what the message names, "
        "then retry",
    ),
    # 10, 11: outcomes
    "denied": ErrorSpec(
        ExitStatus.FINAL_FAILURE,
        False,
        "a person denied this command; do not run it another way, tell the person",
    ),
    "effect_unknown": ErrorSpec(
        ExitStatus.UNKNOWN,
        False,
        "the command started but relay never saw it end; check whether its effect "
        "happened, then a person settles it at a terminal: `relay ledger show KEY` names "
        "the commands",
    ),
    # 75: not yet / busy
    "timeout": ErrorSpec(
        ExitStatus.NOT_YET,
        True,
        "not a failure: nothing was decided or finished yet; call the same command "
        "again (same id or key) to keep waiting",
    ),
    "nothing_to_claim": ErrorSpec(
        ExitStatus.NOT_YET,
        True,
        Said.of(
            "nothing was taken (the message says why); a plain ",
            relay("claim"),
            " takes the oldest queued request, ",
            relay("claim", "--wait", "5m"),
            " waits for one",
        ),
    ),
    "busy": ErrorSpec(
        ExitStatus.NOT_YET,
        True,
        "the database stayed locked by another process (a relay command, or a tool "
        "with relay.db open); retry the same command",
    ),
    "in_progress": ErrorSpec(
        ExitStatus.NOT_YET,
        True,
        "this key is running in another process right now; wait and retry the same "
        "command to get its outcome",
    ),
    "database_unavailable": ErrorSpec(
        ExitStatus.NOT_YET,
        True,
        "the PostgreSQL server could not be reached or stopped answering; wait "
        "retry_after_seconds, then retry the same command with the same id or key (a retry "
        "is answered from what is stored)",
    ),
    # 1: bug
    "internal_error": ErrorSpec(
        ExitStatus.INTERNAL,
        False,
        "this is a bug in relay; rerun with RELAY_DEBUG=1 to see the traceback and report it",
    ),
}


class RelayError(Exception):
    """A failure with a code from the taxonomy. ``detail`` adds specifics to the hint:
    text, or a ``Said`` when it names commands, which the output layer renders with the
    call's scope flags (design.md §14); the fixed hint stays first, unchanged.

    ``outcome_unknown`` is True on a ``database_unavailable`` raised when the connection
    broke at or after COMMIT was sent (design.md §13): the change may have been made.
    """

    outcome_unknown = False

    def __init__(
        self,
        code: ErrorCode,
        message: str | None = None,
        *,
        detail: str | Said | None = None,
        retry_after: float | None = None,
        exit_code: int | None = None,
        hint: str | None = None,
    ) -> None:
        if code not in ERRORS:
            raise ValueError(f"unknown error code {code!r}")
        if (
            exit_code is not None
            and exit_code != ERRORS[code].exit_code
            and exit_code not in dict(ERRORS[code].also_exits)
        ):
            raise ValueError(f"{code} does not exit {exit_code} (see its also_exits)")
        self.code = code
        self.message = message or code.replace("_", " ")
        self.said = said(detail)
        self.retry_after = retry_after
        self._exit_code = exit_code
        self._hint = hint  # replaces the code's hint where it would mislead
        super().__init__(self.message)

    @property
    def spec(self) -> ErrorSpec:
        return ERRORS[self.code]

    @property
    def exit_code(self) -> int:
        """The code's exit status, or one of its ``also_exits`` where that applies."""
        return self.spec.exit_code if self._exit_code is None else self._exit_code

    @property
    def detail(self) -> str | None:
        """The detail as one line of text (its commands without scope flags)."""
        return self.said.text() if self.said else None

    @detail.setter
    def detail(self, value: str | Said | None) -> None:
        self.said = said(value)

    def hint_said(self) -> Said:
        """The fixed hint, then the detail in parentheses, as prose with its commands."""
        base = said(self.spec.said_hint if self._hint is None else self._hint).parts
        if not self.said:
            return Said.of(*base)
        if isinstance(self.said.parts[-1], Choices):  # the choices end it, one per line
            return Said.of(*base, "; ", *self.said.parts)
        return Said.of(*base, " (", *self.said.parts, ")")

    @property
    def hint(self) -> str:
        return self.hint_said().text()

    def to_dict(self, scope: Scope = NO_SCOPE) -> dict[str, Any]:
        """The JSON error object; its ``hint`` names commands with ``scope``'s flags."""
        retry_after = None
        if self.retry_after is not None:
            retry_after = max(0.0, round(self.retry_after, 3))
        return {
            "code": self.code,
            "message": self.message,
            "hint": self.hint_said().text(scope),
            "retryable": self.spec.retryable,
            "retry_after_seconds": retry_after,
            "exit_code": self.exit_code,
        }


def cannot_start(message: str, status: int, detail: str) -> RelayError:
    """`run` or `once` could not start its command: ``usage_error``, exiting ``status``
    (127 not found, 126 not executable) as a shell does (the table's ``also_exits``)."""
    return RelayError(
        "usage_error", f"cannot start the command: {message}", detail=detail, exit_code=status
    )
