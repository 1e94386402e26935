"""Request commands: send, prepare, submit, show, list, wait, cancel, inbox, claim, ack,
reply, fail, reject, resolve, sweep."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Callable, Optional, Protocol, TypedDict

import typer

from ..core import clock
from ..core.command import Said, relay
from ..core.errors import ExitStatus, RelayError
from ..core.limits import (
    CLAIM_LEASE,
    DEFAULT_CLAIM_LEASE_S,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_TTL_S,
    DEFAULT_WAIT_S,
    DRAFT_TTL_S,
    MAX_ATTEMPTS_RANGE,
    MAX_OPEN_DRAFTS,
    MIN_PREFIX,
    REPLY_WITHIN,
    TTL,
    WAIT,
)
from ..core.output import Output, size
from ..requests import activity, claiming, due, lifecycle, sending, validate, waiting
from ..requests.peers import validate_name
from . import complete
from .app import (
    AsOpt,
    Env,
    HomeOpt,
    JsonOpt,
    PeerOpt,
    SessionOpt,
    StatesOpt,
    WholeNumber,
    app,
    call_context,
    duration,
    examples,
    read_text,
)
from .click_seam import Choice
from .request_view import (
    ALREADY_SENT,
    FIELD_STYLES,
    INBOX_COLUMNS,
    LIST_COLUMNS,
    LIST_COLUMNS_PIPED,
    render_full,
    render_request,
)

if TYPE_CHECKING:
    from ..core.output import JsonObject

# ------------------------------------------------------------------ options
TextArg = Annotated[
    Optional[str],
    typer.Argument(
        metavar="[TEXT|-]",
        show_default=False,
        help="The text; `-` reads stdin (recommended: argv is visible to other users).",
    ),
]
FileOpt = Annotated[
    Optional[str], typer.Option("--file", metavar="PATH", help="Read the text from a file.")
]
ToOpt = Annotated[str, PeerOpt("--to", "The recipient peer.")]


def _id_arg(candidates: Callable[..., Any]) -> Any:
    """The ID argument of a command that names an existing request, for its ``Annotated``
    type; shell completion offers the ids this command accepts (relay_cli.cli.complete)."""
    return typer.Argument(
        metavar="ID",
        show_default=False,
        autocompletion=candidates,
        help=f"The request id, or a unique prefix of at least {MIN_PREFIX} characters of it.",
    )


AnyIdArg = Annotated[str, _id_arg(complete.requests("any"))]
ClaimedIdArg = Annotated[str, _id_arg(complete.requests("claimed"))]
TtlOpt = Annotated[
    Optional[str],
    typer.Option(
        "--ttl",
        metavar="D",
        help=f"Expire if still queued after D ({clock.span(TTL, DEFAULT_TTL_S)}).",
    ),
]
ReplyWithinOpt = Annotated[
    Optional[str],
    typer.Option(
        "--reply-within",
        metavar="D",
        help="After ack, no reply within D makes it delivery_unknown "
        f"({clock.span(REPLY_WITHIN)}).",
    ),
]
OnLostOpt = Annotated[
    str,
    typer.Option(
        "--on-lost",
        click_type=Choice(validate.ON_LOST, validate.validate_on_lost),
        help="When a claim lease lapses before ack: delivery_unknown, or queue again.",
    ),
]
MaxAttemptsOpt = Annotated[
    int,
    typer.Option(
        "--max-attempts",
        metavar="N",
        click_type=WholeNumber("--max-attempts"),
        help="Claims allowed with --on-lost redeliver ({}-{}).".format(*MAX_ATTEMPTS_RANGE),
    ),
]
InReplyToOpt = Annotated[
    Optional[str],
    typer.Option("--in-reply-to", metavar="ID", help="Link a follow-up to an earlier request."),
]


class Work(TypedDict):
    """The work of a request as `send` and `prepare` take it (``sending.send``'s)."""

    to: str
    ttl_s: int
    reply_within_s: int | None
    on_lost: str
    max_attempts: int
    in_reply_to: str | None
    text: str


def _send_inputs(
    out: Output,
    to: str,
    text: str | None,
    file: str | None,
    ttl: str | None,
    reply_within: str | None,
    on_lost: str,
    max_attempts: int,
    in_reply_to: str | None,
) -> Work:
    return Work(
        to=validate_name(to, "--to"),
        ttl_s=duration(ttl, TTL, "--ttl", DEFAULT_TTL_S),
        reply_within_s=duration(reply_within, REPLY_WITHIN, "--reply-within", None),
        on_lost=validate.validate_on_lost(on_lost),
        max_attempts=validate.validate_max_attempts(max_attempts),
        in_reply_to=validate.validate_id(in_reply_to, "--in-reply-to")
        if in_reply_to is not None
        else None,
        text=read_text(text, file, out=out),
    )


class _Render(Protocol):
    """How a request is shown to a person (``render_request``, ``render_full``)."""

    def __call__(
        self, out: Output, obj: JsonObject, now: int, extra: tuple[str, ...] = ...
    ) -> None: ...


def _emit(env: Env, obj: JsonObject, render: _Render, *args: tuple[str, ...]) -> int:
    if env.json:
        env.out.json(obj)
    else:
        render(env.out, obj, env.clock.now_ms(), *args)
    return 0


# ------------------------------------------------------------------ commands
@app.command(
    "id",
    epilog=examples(
        "ID=$(relay id)",
        'relay send --to reviewer --id "$ID" - < task.md',
    ),
)
def id_(json_: JsonOpt = False, home: HomeOpt = None) -> int:
    """Print a new request id (a random UUID) for `send --id`.

    Nothing else is needed (no uuidgen). It reads and writes nothing: the id names nothing
    until a send uses it.
    """
    del home  # accepted like on every command; no state is read
    obj = sending.id_object(validate.new_id())
    out = Output.of(call_context(), json_)
    if json_:
        out.json(obj)
    else:
        out.line(obj["id"])
    return 0


@app.command(
    epilog=examples(
        "# write the id out: a retry is the same line, word for word, in any shell",
        "relay id   # prints a new id, e.g. 7d8e2f4a-1b3c-4d5e-8f90-a1b2c3d4e5f6",
        "relay send --to bob --id 7d8e2f4a-1b3c-4d5e-8f90-a1b2c3d4e5f6 - < task.md",
        "relay send --to bob --ttl 2h --id 0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9 -",
    )
)
def send(
    to: ToOpt,
    text: TextArg = None,
    id_: Annotated[
        Optional[str],
        typer.Option(
            "--id",
            metavar="UUID",
            help="Your request id. Pass it (and the same content) again to retry safely.",
        ),
    ] = None,
    ttl: TtlOpt = None,
    reply_within: ReplyWithinOpt = None,
    on_lost: OnLostOpt = "unknown",
    max_attempts: MaxAttemptsOpt = DEFAULT_MAX_ATTEMPTS,
    in_reply_to: InReplyToOpt = None,
    file: FileOpt = None,
    as_: AsOpt = None,
    session: SessionOpt = None,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """Create a request, or return the existing one for a retry.

    The request is queued. The same --id with the same content answers duplicate: true and creates nothing; the
    same id with other content is refused (request_id_conflict).
    """
    env = Env(json_, home, as_, session)
    # a caller with a session token needs a home that holds it: a mistyped home is never
    # made; a name alone starts from nothing (design.md §2)
    env.creates = env.identity()[1] is None
    request_id = validate.validate_id(id_, "--id") if id_ is not None else None
    inputs = _send_inputs(
        env.out, to, text, file, ttl, reply_within, on_lost, max_attempts, in_reply_to
    )
    with env.unit() as now:
        result = sending.send(
            env.store, now, env.caller(), request_id=request_id, limits=env.ctx.limits, **inputs
        )
        # the same work under another id, still open: said to a person (design.md §14)
        twins = (
            sending.same_text_open(env.store, result)
            if not env.json and not result["duplicate"]
            else []
        )
    if not env.json and id_ is None:
        env.out.note(f"request id: {result['id']} (pass --id next time so a retry is safe)")
    if not env.json and result["duplicate"]:
        env.out.line(ALREADY_SENT)
    _emit(env, result, render_request, ("duplicate", "recipient_active", "wakeup"))
    if twins:
        out = env.out
        shown = out.short_ids([result["id"], *(t["id"] for t in twins)])
        open_ = ", ".join(
            f"{shown[t['id']]} ({t['state']}, sent {out.when(clock.iso(t['created_at']), now)})"
            for t in twins
        )
        out.para(
            f"note: {open_} "
            + ("is" if len(twins) == 1 else "are")
            + f" open with the same text from {result['from']} to {result['to']}: "
            f"{shown[result['id']]} is a new request all the same (only the same --id makes "
            "a retry safe; a mistyped one queues the work twice)"
        )
    return 0


@app.command(
    help=(
        "Store a draft and print its id; `relay submit ID` queues it.\n\n"
        f"Nothing is queued until then. Drafts live {clock.duration_text(DRAFT_TTL_S)}; at most "
        f"{MAX_OPEN_DRAFTS} unsubmitted drafts per sender."
    ),
    epilog=examples(
        "relay prepare --to reviewer - < task.md   # prints the draft id",
        "relay submit 1a2b3c4d                     # that id, or 8+ characters of it",
    ),
)
def prepare(
    to: ToOpt,
    text: TextArg = None,
    id_: Annotated[
        Optional[str],
        typer.Option("--id", metavar="UUID", help="Draft id (default: relay issues one)."),
    ] = None,
    ttl: TtlOpt = None,
    reply_within: ReplyWithinOpt = None,
    on_lost: OnLostOpt = "unknown",
    max_attempts: MaxAttemptsOpt = DEFAULT_MAX_ATTEMPTS,
    in_reply_to: InReplyToOpt = None,
    file: FileOpt = None,
    as_: AsOpt = None,
    session: SessionOpt = None,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    env = Env(json_, home, as_, session)
    # a caller with a session token needs a home that holds it: a mistyped home is never
    # made; a name alone starts from nothing (design.md §2)
    env.creates = env.identity()[1] is None
    draft_id = validate.validate_id(id_, "--id") if id_ is not None else None
    inputs = _send_inputs(
        env.out, to, text, file, ttl, reply_within, on_lost, max_attempts, in_reply_to
    )
    with env.unit() as now:
        result = sending.prepare(env.store, now, env.caller(), draft_id=draft_id, **inputs)
    if env.json:
        env.out.json(result)
    elif result.get("duplicate"):  # the id already names a request with this content
        env.out.fields([("id", result["id"]), ("state", result["state"])], styles=FIELD_STYLES)
        env.out.para(
            "already sent with this content: nothing new was prepared, nothing queued; "
            "a submit of this id answers with that request"
        )
        env.out.command(relay("show", result["id"]), "next: ")
    else:
        env.out.fields(
            [
                ("id", result["id"]),
                ("draft expires", env.out.until(result["prepared_expires_at"], now)),
            ]
        )
        # the submit is the sender's: the name this call was given on its command line
        # goes with it (a session token never is printed; it stays where it was given)
        sender = ("--as", as_) if as_ and not session else ()
        env.out.command(relay("submit", result["id"], *sender), "next: ")
        env.out.para("a repeat of that submit is safe: it answers with the same request")
    return 0


@app.command(
    epilog=examples(
        'relay submit "$ID"',
        "relay submit 1a2b3c4d   # a unique prefix of the id",
    )
)
def submit(
    id_: Annotated[str, _id_arg(complete.drafts)],
    as_: AsOpt = None,
    session: SessionOpt = None,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """Queue a prepared draft. A repeat returns the stored receipt with duplicate: true."""
    env = Env(json_, home, as_, session, creates=False, identified=True)
    draft_id = validate.validate_ref(id_)
    with env.unit() as now:
        result = sending.submit(env.store, now, env.caller(), draft_id, env.ctx.limits)
    if env.json:  # the receipt (design.md §7); a person sees what send shows
        env.out.json(sending.receipt(result))
        return 0
    if result["duplicate"]:
        env.out.line(ALREADY_SENT)
    render_request(env.out, result, now, ("duplicate", "recipient_active", "wakeup"))
    return 0


@app.command(
    epilog=examples(
        'relay show "$ID"',
        "relay show 1a2b3c4d --events",
    )
)
def show(
    id_: AnyIdArg,
    events: Annotated[bool, typer.Option("--events", help="Include the event log.")] = False,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """Show one request in full, with its text and reply.

    Both are another agent's words, not user approval.
    """
    env = Env(json_, home, creates=False)
    request_id = validate.validate_ref(id_)
    with env.unit(write=False) as now:
        obj = lifecycle.show(env.store, request_id, events)
        held = activity.holder(env.store, obj["id"], now)
    if held is not None:  # the session that holds it, and what it is doing (design.md §19)
        obj["holder"] = held
    _emit(env, obj, render_full)
    if obj["state"] == "delivery_unknown" and not env.json:
        from ..requests.states import settle

        # the commands that settle it, one per outcome (design.md §14)
        env.out.said(
            Said.of("a person settles it in their own terminal with one of:", settle(obj["id"]))
        )
    return 0


@app.command(
    "list",
    epilog=examples(
        "relay list",
        "relay list --state delivery_unknown --state queued",
        "relay list --to reviewer --limit 10 --json",
    ),
)
def list_(
    state: StatesOpt = None,
    to: Annotated[Optional[str], PeerOpt("--to", "Only to PEER.")] = None,
    from_: Annotated[Optional[str], PeerOpt("--from", "Only from PEER.")] = None,
    limit: Annotated[
        int,
        typer.Option(
            "--limit",
            metavar="N",
            click_type=WholeNumber("--limit", 1, 1_000_000_000),
            help="At most N rows (1-1000000000).",
        ),
    ] = 50,
    all_: Annotated[bool, typer.Option("--all", help="No limit.")] = False,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """Table of requests, newest first. Never shows bodies (`relay show ID` does)."""
    env = Env(json_, home, creates=False)
    states = validate.validate_states(state)
    if to:
        validate_name(to, "--to")
    if from_:
        validate_name(from_, "--from")
    with env.unit(write=False) as now:
        result = lifecycle.list_requests(env.store, states, to, from_, None if all_ else limit)
        unknown, known = (
            lifecycle.unknown_names(env.store, to, from_)
            if not result["requests"] and not env.json
            else ([], [])
        )
    if env.json:
        env.out.json(result)
        return 0
    out = env.out
    short = out.short_ids(r["id"] for r in result["requests"])
    rows = [
        [
            short[r["id"]],
            r["state"],
            r["from"],
            r["to"],
            r["reason"],
            out.when(r["updated_at"], now),
        ]
        + ([] if out.terminal else [r["created_at"]])
        for r in result["requests"]
    ]
    out.table(
        LIST_COLUMNS if out.terminal else LIST_COLUMNS_PIPED, rows, empty="no requests", tsv=True
    )
    if unknown:  # a mistyped name is not an empty queue (design.md §14)
        out.para(
            f"note: no peer is named {' or '.join(repr(n) for n in unknown)}; known peers: "
            + (", ".join(known) or "none yet")
        )
    if result["has_more"]:
        env.out.para(f"(more rows: raise --limit above {limit} or pass --all)")
    return 0


@app.command(
    epilog=examples(
        'relay wait "$ID" --timeout 5m',
        'relay wait "$ID" --timeout 5m; echo "exit $?"',
    )
)
def wait(
    id_: AnyIdArg,
    timeout: Annotated[
        Optional[str],
        typer.Option(
            "--timeout",
            metavar="D",
            help=f"Give up waiting after D ({clock.span(WAIT, DEFAULT_WAIT_S)}).",
        ),
    ] = None,
    as_: AsOpt = None,
    session: SessionOpt = None,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """Block until the request is final; print it as it is then.

    Exit status: 0 completed; 10 failed, rejected, expired or cancelled; 11
    delivery_unknown; 75 still open when the timeout passed (not a failure: wait again).
    """
    env = Env(json_, home, as_, session, creates=False)
    ref = validate.validate_ref(id_)
    timeout_s = duration(timeout, WAIT, "--timeout", DEFAULT_WAIT_S)
    code, obj = waiting.wait(
        env.store,
        *env.identity(),
        ref,
        timeout_s,
        on_block=lambda request_id, state: env.out.waiting(
            f"relay: waiting up to {clock.human_duration(timeout_s)} for {request_id[:8]} to "
            f"finish (now {state})"
        ),
    )
    _emit(env, obj, render_full)
    if code == ExitStatus.NOT_YET:
        env.out.error(
            RelayError(
                "timeout",
                f"{obj['id']} is still {obj['state']} after {clock.human_duration(timeout_s)}",
            )
        )
    return code


@app.command(
    epilog=examples(
        'relay cancel "$ID"',
    )
)
def cancel(
    id_: Annotated[str, _id_arg(complete.requests("sent_queued"))],
    as_: AsOpt = None,
    session: SessionOpt = None,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """Withdraw a request you sent while it is still queued.

    Nobody holds it now. One queued again after a claim (--on-lost redeliver, or a
    person's requeue) was delivered once, and that claim may have started work.
    """
    env = Env(json_, home, as_, session, creates=False, identified=True)
    request_id = validate.validate_ref(id_)
    with env.unit() as now:
        obj = lifecycle.cancel(env.store, now, env.caller(), request_id)
    return _emit(env, obj, render_request, ("duplicate",))


@app.command(
    epilog=examples(
        "relay inbox",
        "relay inbox --limit 10 --json",
    )
)
def inbox(
    limit: Annotated[
        int,
        typer.Option(
            "--limit",
            metavar="N",
            click_type=WholeNumber("--limit", 1, 1_000_000_000),
            help="At most N rows, the oldest first (1-1000000000).",
        ),
    ] = 50,
    all_: Annotated[bool, typer.Option("--all", help="No limit.")] = False,
    as_: AsOpt = None,
    session: SessionOpt = None,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """Queued requests for me, the oldest first: id, from, age, size.

    No bodies (`claim` takes one). 50 by default; how many more are queued is said
    (with --json: has_more and more).
    """
    env = Env(json_, home, as_, session, creates=False, identified=True)
    with env.unit(write=False) as now:
        result = lifecycle.inbox(env.store, env.caller(), None if all_ else limit)
    if env.json:
        env.out.json(result)
        return 0
    out = env.out
    short = out.short_ids(r["id"] for r in result["requests"])
    out.table(
        INBOX_COLUMNS,
        [
            [
                short[r["id"]],
                r["from"],
                out.when(r["created_at"], now),
                size(r["text_bytes"]) if out.terminal else r["text_bytes"],
            ]
            for r in result["requests"]
        ],
        empty="nothing queued for you",
        tsv=True,
    )
    if result["has_more"]:
        out.para(f"({result['more']} more queued: raise --limit above {limit} or pass --all)")
    return 0


@app.command(
    epilog=examples(
        "relay id                   # an attempt id, once before the first try",
        "relay claim --attempt ID   # a retry passes the same ID",
        "relay claim --wait 5m",
        "relay claim --id 1a2b3c4d --lease 10m",
        "relay claim --again        # the answer of the last claim was lost",
    )
)
def claim(
    lease: Annotated[
        Optional[str],
        typer.Option(
            "--lease",
            metavar="D",
            help="How long the claim holds before ack "
            f"({clock.span(CLAIM_LEASE, DEFAULT_CLAIM_LEASE_S)}).",
        ),
    ] = None,
    wait: Annotated[
        Optional[str],
        typer.Option(
            "--wait",
            metavar="D",
            help=f"Wait up to D for a request to arrive ({clock.span(WAIT, 0)}).",
        ),
    ] = None,
    id_: Annotated[
        Optional[str],
        typer.Option(
            "--id",
            metavar="ID",
            autocompletion=complete.requests("queued_for_me"),
            help="Claim this queued request (a unique prefix of 8+ characters will do).",
        ),
    ] = None,
    again: Annotated[
        bool,
        typer.Option(
            "--again",
            help="Take nothing new: show again what a claim whose answer was lost "
            "took, or say what became of it (with --attempt: that claim's).",
        ),
    ] = False,
    attempt: Annotated[
        Optional[str],
        typer.Option(
            "--attempt",
            metavar="ID",
            help="An id you choose for this claim (`relay id` makes one): a retry with "
            "the same id is answered from what is stored and takes nothing new.",
        ),
    ] = None,
    as_: AsOpt = None,
    session: SessionOpt = None,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """Take the oldest queued request for me and show its text.

    First in, first out; the request becomes delivered. Needs an active session. Exit 75 (nothing_to_claim) when nothing came.

    Every claim takes a new request, so claimers that share a session never get the same one. Claimers that share a session (an agent and its subagents) pass --attempt with an id of their own: a retry with the same id (plain, or --again) gets that claim's request (duplicate: true) or is told what became of it, and no other claimer gets anything of it. Without --attempt, `relay claim --again` shows the one request this session claimed without an attempt id and has not acked (claimer_known: false: relay cannot tell which claimer took it); with several, or once the session had two claims in flight at once, it shows none and lists them. A claim that takes nothing, or a second one, names the requests this session still holds unacked (held_unacked).
    """
    env = Env(json_, home, as_, session, creates=False, identified=True)
    lease_s = duration(lease, CLAIM_LEASE, "--lease", DEFAULT_CLAIM_LEASE_S)
    wait_s = duration(wait, WAIT, "--wait", 0)
    ref = validate.validate_ref(id_, "--id") if id_ is not None else None
    attempt_id = validate.validate_id(attempt, "--attempt") if attempt is not None else None
    if again and (ref is not None or wait_s):
        raise RelayError(
            "usage_error", "--again takes nothing new, so it goes with neither --id nor --wait"
        )
    with env.unit(write=False):
        caller = env.caller()
    obj = waiting.claim_waiting(
        env.store,
        caller,
        lease_s,
        ref,
        wait_s,
        on_block=lambda request_id: env.out.waiting(
            f"relay: waiting up to {clock.human_duration(wait_s)} for "
            + (f"{request_id[:8]}" if request_id else f"a request to {caller.name}")
        ),
        again=again,
        attempt_id=attempt_id,
    )
    if env.json:
        env.out.json(obj)
    else:
        note: Said | str | None = None
        if obj.get("held_unacked"):
            # read after the claim committed: a failure here (busy, say) must not lose the
            # claimed request's text, so the note is left out and the ids are named instead
            try:
                with env.unit(write=False):
                    note = claiming.held_note(env.store, env.caller(), obj["held_unacked"])
            except RelayError:
                note = "this session also holds unacked: " + ", ".join(obj["held_unacked"])
        render_claim(
            env.out,
            obj,
            env.clock.now_ms(),
            note=note,
            by_attempt=attempt_id is not None,
            session_ends=_session_end(env),
            lease_given=lease is not None,
        )
    return 0


def _session_end(env: Env) -> int | None:
    """When the claiming session's lease ends now (the claim renewed it), or None when
    that cannot be read: a request it holds becomes delivery_unknown then (design.md §3)."""
    try:
        with env.unit(write=False):
            caller = env.caller()
            session = env.store.get_session(caller.session["id"]) if caller.session else None
    except RelayError:
        return None
    return None if session is None else int(session["lease_expires_at"])


# an agent's claim names the request by this many characters of its id (design.md §16)
CLAIM_REF = 12


def render_claim(
    out: Output,
    obj: JsonObject,
    now: int,
    *,
    note: Said | str | None = None,
    by_attempt: bool = False,
    session_ends: int | None = None,
    lease_given: bool = False,
) -> None:
    """The claimed request and what to run next (design.md §14): for a person at a
    terminal its fields, the framed text and the commands, each on a line of its own;
    for an agent (stdout not a terminal) the same in few words (design.md §16). A request
    shown again without an attempt id is the one this session holds, not necessarily the
    asker's (design.md §6); an acknowledged one needs no ack, only its answer."""
    if obj.get("duplicate"):
        if by_attempt:
            out.para(
                "this claim took it already and this session holds it; here it is "
                f"again, {obj['state']} (a retry takes nothing new)"
            )
        else:
            out.para(
                "this session claimed it already and has not acked it; here it is "
                "again (claim --again takes nothing new); relay cannot tell which "
                "claimer of this session took it: if another claimer of this session "
                "holds it, leave it to them"
            )
    if note:
        out.said(Said.of("note: ") + note)
    rid = obj["id"]
    # piped, the request is named by a prefix every command takes back (design.md §16)
    ref = rid if out.terminal else rid[:CLAIM_REF]
    if out.terminal:
        render_full(out, obj, now)
    else:  # an agent reads it: the text, and the commands that name it (design.md §16)
        if obj["state"] != "delivered":
            out.line(f"claimed {ref}, {obj['state']}")
        out.message(obj["from"], obj["text"])
    then = "next: "
    if obj["state"] == "delivered":
        out.command(relay("ack", ref), "next: ")
        out.said(ack_by(out, obj, now, session_ends, lease_given))
        then = "then: "
    # `-` reads the answer from standard input (a person: the terminal, until Ctrl-D)
    out.command(relay("reply", ref, tail=("-",)), then)
    if out.terminal:
        out.para("  (type the answer, then Ctrl-D)")
        out.para("or end it with relay fail or relay reject, each with --reason saying why")
    else:
        out.line("or end it: fail or reject, with --reason")


def ack_by(
    out: Output,
    obj: JsonObject,
    now: int,
    session_ends: int | None = None,
    lease_given: bool = False,
) -> Said | str:
    """By when the claim must be acknowledged, and what happens after (design.md §3,
    §14): the earlier of the claim lease and the claiming session's lease, so a person
    who reads before acking learns of neither from a state_conflict; a --lease that
    outlives the session is said so."""
    claim_ends = clock.parse_iso(obj["lease_expires_at"])
    if not out.terminal:  # an agent's: few words, whole seconds (rounded down)
        if session_ends is not None and session_ends < claim_ends:
            return (
                f"ack by {_second(session_ends)} (your session's lease ends; any relay "
                "command renews it), else delivery_unknown"
            )
    elif session_ends is not None and session_ends < claim_ends:
        given = "--lease " if lease_given else ""
        return Said.of(
            f"ack by {out.until(clock.iso(session_ends), now)}: this session's lease ends "
            f"then, before the claim's ({given}{out.until(obj['lease_expires_at'], now)}), "
            "and the request becomes delivery_unknown; any relay command of this session, ",
            relay("peers", "heartbeat"),
            " for one, renews its lease",
        )
    after = (
        "it is queued again"
        if obj["on_lost"] == "redeliver" and obj["attempts"] < obj["max_attempts"]
        else "it fails (no attempts left)"
        if obj["on_lost"] == "redeliver"
        else "it becomes delivery_unknown"
    )
    if not out.terminal:
        return f"ack by {_second(claim_ends)}, else {after}"
    return (
        f"ack by {out.until(obj['lease_expires_at'], now)}: the claim lease ends then "
        f"and {after} (claim --lease D holds it longer, up to "
        f"{clock.duration_text(CLAIM_LEASE[1])})"
    )


def _second(ms: int) -> str:
    """``ms`` as an ISO time in whole seconds, rounded down (a deadline told early)."""
    return f"{clock.iso(ms // 1000 * 1000)}".replace(".000Z", "Z")


def _act(env: Env, fn: Callable[..., JsonObject], request_id: str, *args: object) -> JsonObject:
    with env.unit() as now:
        return fn(env.store, now, env.caller(), request_id, *args)


@app.command(
    epilog=examples(
        'relay ack "$ID"',
    )
)
def ack(
    id_: ClaimedIdArg,
    as_: AsOpt = None,
    session: SessionOpt = None,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """Confirm you have read a request you claimed (state acknowledged). Safe to repeat."""
    env = Env(json_, home, as_, session, creates=False, identified=True)
    obj = _act(env, lifecycle.ack, validate.validate_ref(id_))
    return _emit(env, obj, render_request, ("duplicate",))


@app.command(
    epilog=examples(
        'relay reply "$ID" - < reply.md',
        "relay reply \"$ID\" 'Done: see commit 1f2e3d4.'",
    )
)
def reply(
    id_: ClaimedIdArg,
    text: TextArg = None,
    file: FileOpt = None,
    as_: AsOpt = None,
    session: SessionOpt = None,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """Complete a request you claimed with a reply (state completed).

    The same reply again is a no-op (duplicate: true); a different one is reply_conflict.
    """
    env = Env(json_, home, as_, session, creates=False, identified=True)
    request_id = validate.validate_ref(id_)
    body = read_text(text, file, "reply", out=env.out)
    obj = _act(env, lifecycle.reply, request_id, body)
    return _emit(env, obj, render_request, ("duplicate",))


ReasonOpt = Annotated[
    str, typer.Option("--reason", metavar="TEXT", help="Why, in words (stored as detail).")
]


@app.command(
    epilog=examples(
        "relay fail \"$ID\" --reason 'the tests fail on main, see CI'",
    )
)
def fail(
    id_: ClaimedIdArg,
    reason: ReasonOpt,
    as_: AsOpt = None,
    session: SessionOpt = None,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """Declare a request you claimed failed (state failed)."""
    env = Env(json_, home, as_, session, creates=False, identified=True)
    request_id = validate.validate_ref(id_)
    detail = validate.validate_text(reason, "--reason")
    obj = _act(env, lifecycle.fail, request_id, detail)
    return _emit(env, obj, render_request, ("duplicate",))


@app.command(
    epilog=examples(
        "relay reject \"$ID\" --reason 'out of scope for this repository'",
    )
)
def reject(
    id_: ClaimedIdArg,
    reason: ReasonOpt,
    as_: AsOpt = None,
    session: SessionOpt = None,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """Decline a request you claimed: by your word, nothing was done.

    The request becomes rejected.
    """
    env = Env(json_, home, as_, session, creates=False, identified=True)
    request_id = validate.validate_ref(id_)
    detail = validate.validate_text(reason, "--reason")
    obj = _act(env, lifecycle.reject, request_id, detail)
    return _emit(env, obj, render_request, ("duplicate",))


@app.command(
    epilog=examples(
        'relay show "$ID" --events   # what happened, and why it is unknown',
        "relay resolve \"$ID\" --outcome completed --note 'the commit is there'",
        'relay resolve "$ID" --outcome requeue',
    )
)
def resolve(
    id_: Annotated[str, _id_arg(complete.requests("unknown"))],
    outcome: Annotated[
        str,
        typer.Option(
            "--outcome",
            click_type=Choice(lifecycle.RESOLVE_OUTCOMES, lifecycle.validate_outcome),
            help="What the person found: it was done, it failed, or queue it again.",
        ),
    ],
    note: Annotated[
        Optional[str], typer.Option("--note", metavar="TEXT", help="Why (stored as detail).")
    ] = None,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """A person settles a delivery_unknown request, at a terminal.

    It is recorded as person:<user>. Check first whether the work happened: requeue queues it again for a recipient to claim.
    Refused unless standard input is a terminal (approval_needs_terminal): an agent's
    shell must not settle work in a person's name. That stops accidents and habits, not a
    program that fakes a terminal.
    """
    env = Env(json_, home, creates=False)
    request_id = validate.validate_ref(id_)
    detail = validate.validate_text(note, "--note") if note is not None else None
    with env.unit() as now:
        obj = lifecycle.resolve(
            env.store, now, request_id, outcome, detail, terminal=env.ctx.stdin_terminal
        )
    return _emit(env, obj, render_request)


@app.command(
    epilog=examples(
        "relay sweep",
        "relay sweep --json",
    )
)
def sweep(json_: JsonOpt = False, home: HomeOpt = None) -> int:
    """Apply due time-based transitions now.

    Every command already does this before it reads or writes.
    """
    env = Env(json_, home, creates=False)
    result = due.sweep(env.store)
    if env.json:
        env.out.json(result)
    else:
        rows = [[k, v] for k, v in result["transitions"].items()]
        env.out.table(["transition", "count"], rows, empty="nothing was due")
    return 0
