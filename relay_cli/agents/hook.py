"""`relay hook claude|codex|gemini|copilot`: relay's command hooks (design.md §12).

Formats followed, checked against the runtimes' own shipped packages (tests/fixtures/README.md
names the package versions and files; the fixtures and output schemas there come from them):

- Claude Code 2.1.332 (``@anthropic-ai/claude-agent-sdk`` 0.3.332, ``sdk.d.ts``): the input
  has ``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``; SessionStart adds
  ``source`` (startup, resume, clear, compact, fork), UserPromptSubmit ``prompt`` and the
  optional ``source`` (user, sdk, system, loop_wakeup, schedule_wakeup, poll_event: who
  submitted it; 2.1.332 and 2.1.336 sent it on no turn in relay's harness; another Claude
  session's SendMessage turn is told by its ``<cross-session-message>`` envelope), Stop
  ``stop_hook_active``, SessionEnd ``reason``. Output on exit 0 is one
  JSON object: ``{"hookSpecificOutput": {"hookEventName", "additionalContext"}}`` for
  context, ``{"decision": "block", "reason"}`` to keep a Stop going. ``CLAUDE_ENV_FILE``
  names a file of ``export`` lines applied to the session's later shell commands.
- Codex (``@openai/codex``, the release in ``runtimes.CODEX_CHECKED``; its hook JSON schemas ship inside the binary): the same
  event names and the same output fields as Claude Code, with ``additionalProperties:
  false`` on every output; UserPromptSubmit has no ``source``; SessionEnd has no output
  schema (relay prints nothing there). That Codex gives hooks no env file; a Codex that
  sets ``CODEX_ENV_FILE`` (or ``CLAUDE_ENV_FILE``) gets the export lines there.
- Gemini CLI 0.61.0 (``@google/gemini-cli``, ``bundle/docs/hooks/reference.md`` and the hook
  types in its bundle): other event names -- BeforeAgent (like UserPromptSubmit, with
  ``prompt``, no ``source``) and AfterAgent (like Stop: ``{"decision": "deny", "reason"}``
  makes Gemini send the reason back as a new prompt, and that prompt fires BeforeAgent
  again) -- millisecond timeouts, no env file (``relay run`` gives the identity).
- GitHub Copilot CLI 1.0.102 (``@github/copilot``; ``copilot-sdk/types.d.ts`` and the
  payloads its executable sends): given a hook file in Claude Code's format it sends
  Claude-shaped events (``source`` ``new``, ``initial_prompt``; Stop ``stop_hook_active``,
  ``stop_reason``; SessionEnd ``reason`` ``complete`` or ``user_exit``), reads context
  only from a top-level ``{"additionalContext"}`` (``Runtime.context``: it ignores
  ``hookSpecificOutput``), keeps a Stop going with ``{"decision": "block", "reason"}``
  and submits that reason as the next prompt; no env file.

The events relay only observes (``runtimes.OBSERVED``: a permission dialog, a question, a
tool that ran, a failed turn) are recorded as the session's activity (agents/activity.py,
design.md §19) and answered with nothing: relay never allows or denies a tool.

A hook must never break the agent: bad or unknown input, or any failure, ends with exit 0
and nothing on stdout (exit 2 would block a prompt or a stop). Every run is one write
transaction (after due time-based transitions): it makes all of its changes (session,
lease, hook state, notices seen, ``hook_seen_at``) or none.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping

from ..core import clock
from ..core.command import Command, relay
from ..core.digest import sha256_hex
from ..core.limits import COUNT_CAP, HOOK_LEASE_S, MAX_STOP_BLOCKS, SESSION_LEASE
from ..core.limits import MAX_HOOK_INPUT_BYTES as MAX_INPUT_BYTES
from ..core.record import field, record
from ..requests import activity, due, peers
from ..requests.notices import new_batch
from . import activity as observed
from . import alerts, announce, guide, runtimes
from .runtimes import Runtime

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)
if TYPE_CHECKING:
    from typing import Any, TextIO

if TYPE_CHECKING:
    from pathlib import Path

    from relay_cli.store import HookStore, PeerStore, Row, Store

    from ..core.output import JsonObject

EVENTS = runtimes.EVENTS  # relay's four events, in Claude Code's and Codex's names
PERSON_SOURCES = (None, "user")  # UserPromptSubmit sources that are a person's prompt
DEFAULT_LEASE_S = HOOK_LEASE_S  # an agent session has no heartbeat between turns
MAX_REMEMBERED_IDS = 500
MAX_SCANNED = 500  # queued requests a hook reads at most (the oldest first)
MAX_NOTICES = 10
MAX_OWN_PROMPTS = 20
MAX_CONTEXT_CHARS = 9000  # Claude Code moves anything above 10,000 characters to a file

# The ends of the texts relay makes a runtime submit as a prompt, so that one carried
# inside a bigger prompt (Claude Code's task-notification) is recognised by its hash.
OWN_STARTS = announce.OWN_STARTS
OWN_ENDS = (announce.OWN_END,)
# Claude Code delivers another Claude session's message (its SendMessage tool) as a turn of
# its own, wrapped by the sending side in ``<cross-session-message from="…">`` (a teammate's
# in ``<teammate-message teammate_id="…">``), with no ``source``: another Claude wrote it,
# not the person. Text before the envelope is the person's.
OTHER_SESSION_TAGS = ("<cross-session-message", "<teammate-message")

Dialect = Runtime  # how one agent runtime speaks to its command hooks
DIALECTS = runtimes.BY_NAME


@record
class Event:
    name: str  # relay's event name (SessionStart, UserPromptSubmit, Stop, SessionEnd)
    session_id: str
    runtime_name: str = ""  # the runtime's own name for it (BeforeAgent, ...)
    source: str | None = None
    reason: str | None = None
    stop_hook_active: bool = False
    prompt: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # an observed event's fields

    def __post_init__(self) -> None:
        self.runtime_name = self.runtime_name or self.name


@record
class HookEnv:
    """What the hook knows besides the event: identity options and the env file, and the
    call's environment (the runtime's variables, PATH, RELAY_DEBUG) and stderr."""

    peer: str | None
    token: str | None
    env_file: str | None
    lease_s: int = DEFAULT_LEASE_S
    kind: str = "claude"
    dialect: Runtime = runtimes.CLAUDE
    environ: Mapping[str, str] = field(default_factory=dict)
    stderr: TextIO | None = None

    @property
    def has_identity(self) -> bool:
        return bool(self.peer or self.token)


def env_file_from(dialect: Dialect, environ: Mapping[str, str]) -> str | None:
    """The env file the runtime gives this hook: the first of its variables that is set."""
    for var in dialect.env_files:
        if environ.get(var):
            return environ[var]
    return None


def parse(data: bytes, dialect: Dialect = DIALECTS["claude"]) -> Event | None:
    """The event on stdin, or None for anything that is not an event relay handles."""
    if not data or len(data) > MAX_INPUT_BYTES:
        return None
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    raw = doc.get("hook_event_name")
    sid = next((doc[k] for k in dialect.session_keys if k in doc), None)
    if not isinstance(raw, str):
        return None
    name = dialect.relay_event(raw)
    if name is None or not isinstance(sid, str) or not sid.strip() or len(sid) > 200:
        return None
    ev = Event(name, sid, raw)
    if name in runtimes.OBSERVED:  # only recorded (design.md §19)
        extra = observed.fields(name, doc)
        if extra is None:
            return None
        ev.extra = extra
    if name == "SessionStart":
        source = doc.get("source", "startup")
        if not isinstance(source, str):
            return None
        ev.source = source
    elif name == "UserPromptSubmit":
        source, prompt = doc.get("source"), doc.get("prompt")
        if source is not None and not isinstance(source, str):
            return None
        if prompt is not None and not isinstance(prompt, str):
            return None
        ev.source, ev.prompt = source, prompt
    elif name == "Stop":
        active = doc.get("stop_hook_active", False)
        if not isinstance(active, bool):
            return None
        ev.stop_hook_active = active
    elif name == "SessionEnd":
        reason = doc.get("reason")
        if reason is not None and not isinstance(reason, str):
            return None
        ev.reason = reason
    return ev


def handle(store: Store, ev: Event, henv: HookEnv) -> JsonObject | None:
    """Run one event; return the JSON document to print, or None to print nothing."""
    if henv.peer is not None:
        peers.validate_name(henv.peer, "RELAY_PEER")
    if ev.name == "SessionStart":
        return _session_start(store, ev, henv)
    owed: list[alerts.Alert] = []
    with due.unit(store) as now:
        session, refused = lookup_session(store, ev, henv)
        if refused:
            return None  # another runtime session's relay session: not ours to act as
        if session is None:
            if henv.peer and store.get_peer(henv.peer) is not None:
                store.set_hook_seen(henv.peer, now)
            return None
        name = session["peer"]
        store.set_hook_seen(name, now)
        doc = _answer(store, now, session, ev, henv)
        _record_activity(store, session, ev, henv, now, doc)
        owed = alerts.take(store, henv.environ, now)
    alerts.start(owed, henv.environ)
    return doc


def _answer(store: Store, now: int, session: Row, ev: Event, henv: HookEnv) -> JsonObject | None:
    if ev.name == "UserPromptSubmit":
        return _prompt_submit(store, now, session, ev, henv.dialect)
    if ev.name == "Stop":
        return _stop(store, now, session, henv.dialect)
    if ev.name == "SessionEnd":
        _session_end(store, now, session)
    return None  # an observed event (design.md §19): nothing is printed, nothing decided


def _record_activity(
    store: Store, session: Row, ev: Event, henv: HookEnv, now: int, doc: JsonObject | None
) -> None:
    """Record what the event shows of the session (design.md §19); a session that ended
    (SessionEnd: ``peers.leave`` recorded it gone) is left as it is."""
    blocked = doc is not None and doc.get("decision") == henv.dialect.block
    obs = observed.observe(ev, henv.dialect, henv.environ, blocked=blocked)
    current = store.get_session(session["id"])
    if current is not None:
        activity.record(store, current, obs, now)


# ------------------------------------------------------------------------- sessions
def bound_elsewhere(row: Row, ev: Event) -> bool:
    """The relay session is bound to another runtime session than the event's (design.md
    §12: a Codex thread run by a shared daemon carries another peer's environment)."""
    bound = row["agent_session_id"]
    return bound is not None and bound != ev.session_id


def lookup_session(store: Store, ev: Event, henv: HookEnv) -> tuple[Row | None, bool]:
    """(the relay session bound to this runtime session, else the one RELAY_SESSION names
    when it is bound to no other runtime session; refused): ``refused`` is True when
    RELAY_SESSION names a session bound to another runtime session."""
    row = store.session_for_agent(ev.session_id)
    if row is None and henv.token:
        row = store.session_by_token_hash(peers.hash_token(henv.token))
        if row is not None and bound_elsewhere(row, ev):
            return None, True
    if row is None or (henv.peer is not None and henv.peer != row["peer"]):
        return None, False
    return row, False


def _session_start(store: Store, ev: Event, henv: HookEnv) -> JsonObject | None:
    name = henv.peer
    if not name:
        return None
    path = henv.env_file
    size_before: int | None = None
    owed: list[alerts.Alert] = []
    try:
        with due.unit(store) as now:
            started = _start(store, ev, henv, name, now)
            if started is None:
                return None  # refused: bound to another runtime session
            session, token, how = started
            store.set_hook_seen(name, now)
            if session is not None:
                marks = store.hook_marks(session["id"])
                if how == "kept":
                    # compacted: what the conversation was told is summarized away, so the
                    # next listing, Stop block or wake note names those requests again
                    marks["told"] = []
                store.put_hook_marks(session["id"], 0, marks, now, MAX_REMEMBERED_IDS)
                _record_activity(store, session, ev, henv, now, None)
            owed = alerts.take(store, henv.environ, now)
            context = _start_context(name, how, henv)
            if token is not None and path:
                # Written last, inside the transaction: if the file cannot be written
                # nothing is committed, and if the commit fails the lines are taken back.
                size_before = _append_env(
                    path, _export_lines(name, token, store.home, _exported_url(store, henv))
                )
    except BaseException:
        if size_before is not None and path:  # (the lines were appended to ``path``)
            _truncate(path, size_before)
        raise
    alerts.start(owed, henv.environ)
    return _context_doc(ev.runtime_name, context, henv.dialect)


def _start(
    store: Store, ev: Event, henv: HookEnv, name: str, now: int
) -> tuple[Row | None, str | None, str] | None:
    """(session row, token to export or None, how) for a SessionStart of ``name`` (the
    hook's RELAY_PEER), or None when RELAY_SESSION names a session bound to another
    runtime session (nothing is done)."""
    bound = store.session_for_agent(ev.session_id)
    if (
        ev.source == "compact"
        and bound is not None
        and bound["peer"] == name
        and bound["state"] == "active"
    ):
        # The same running conversation, compacted: keep its relay session (superseding it
        # would make its claimed work delivery_unknown). Its token cannot be exported again
        # (relay keeps only a hash); the lines written at its start stay in effect.
        peers.renew(store, peers.Caller(name, bound, "active"), now)
        return bound, None, "kept"
    if henv.token:
        own = store.session_by_token_hash(peers.hash_token(henv.token))
        if own is not None and bound_elsewhere(own, ev):
            return None  # never adopted or re-bound by another runtime session
        if own is not None and own["peer"] == name and own["state"] == "active":
            # Started under `relay run` (or after `peers join`): use that session.
            store.set_session_agent_id(own["id"], ev.session_id)
            peers.renew(store, peers.Caller(name, own, "active"), now)
            return store.get_session(own["id"]), henv.token, "adopted"
    if not henv.env_file:
        return None, None, "no_env_file"
    joined = peers.join(store, name, henv.kind, henv.lease_s, now, agent_session_id=ev.session_id)
    return store.get_session(joined["session_id"]), joined["token"], "joined"


def _export_lines(name: str, token: str, home: Path, url: str | None = None) -> list[str]:
    lines = [
        f"export RELAY_PEER={shlex.quote(name)}",
        f"export RELAY_SESSION={shlex.quote(token)}",
        f"export RELAY_HOME={shlex.quote(os.path.abspath(str(home)))}",
    ]
    if url is not None:  # PostgreSQL (design.md §13)
        lines.append(f"export RELAY_DATABASE_URL={shlex.quote(url)}")
    return lines


def _exported_url(store: Store, henv: HookEnv) -> str | None:
    """The RELAY_DATABASE_URL the env file sets (design.md §13): the URL as relay prints
    it (without a password), or None for none. None too when the hook's URL holds a
    secret and came from its environment ($RELAY_DATABASE_URL), which the agent's shells
    inherit from the runtime as the hook did: a URL without the password would replace
    the one that logs in."""
    from ..store.url import VARIABLE, origin, read

    given = store.shared_url(with_password=True)
    if given is not None and read(given).secrets and origin(given, henv.environ) == VARIABLE:
        return None
    return store.shared_url()


def _append_env(path: str, lines: list[str]) -> int:
    """Append ``lines`` to the env file (created 0600); return its size before."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        before = os.fstat(fd).st_size
        data = "\n" if before and not _ends_with_newline(path, before) else ""
        data += "\n".join(lines) + "\n"
        try:
            raw = data.encode("utf-8")
            if os.write(fd, raw) != len(raw):
                raise OSError("short write to the env file")
            os.fsync(fd)
        except BaseException:
            os.ftruncate(fd, before)  # no half lines left behind
            raise
        return before
    finally:
        os.close(fd)


def _ends_with_newline(path: str, size_: int) -> bool:
    try:
        with open(path, "rb") as f:
            f.seek(size_ - 1)
            return f.read(1) == b"\n"
    except OSError:
        return True


def _truncate(path: str, size_: int) -> None:
    try:
        os.truncate(path, size_)
    except OSError:
        pass


def _run_under_relay(name: str, kind: str, program: str) -> Command:
    """`relay run` for this peer's runtime (design.md §14): the hook is given no scope
    flags, and the person's shell has its RELAY_HOME."""
    return relay("run", "--as", name, "--kind", kind, tail=("--", program), changes=True)


def _start_context(name: str, how: str, henv: HookEnv) -> str:
    """The SessionStart context: the short guide (design.md §18: at most 150 tokens). It
    names no request: the first prompt's listing, a Stop block or a wake note does, so a
    request is never named twice in the first model request."""
    d = henv.dialect
    if how == "no_env_file":
        env = " or ".join(d.env_files)
        why = f"{env} is not set" if env else f"{d.display} gives hooks no env file"
        text = (
            f"relay: no relay session was started for peer {name!r}: {why}, so a session "
            "token could not reach shell commands. relay commands that need a session "
            f"(claim, reply) fail here; starting {d.display} as "
            f"{_run_under_relay(name, henv.kind, d.program).quoted()} gives it one."
        )
    else:
        text = guide.short_text(name, d.name, kept=how == "kept")
    return text


# ------------------------------------------------------------------------ per event
def _ended_note(store: PeerStore, session: Row, dialect: Runtime) -> str:
    status = peers.session_status(store, session)
    code = peers.STATUS_ERRORS.get(status, status)
    return (
        f"relay: the relay session of this {dialect.display} session (peer "
        f"{session['peer']!r}) has ended ({status}); relay commands that use it fail "
        f"with {code}. Requests it had claimed and not finished are now delivery_unknown: "
        "the person decides about them, they are not redone."
    )


def prompt_hash(text: str) -> str:
    return sha256_hex(text.encode("utf-8", "surrogatepass"))


def remember_own_prompt(store: HookStore, session_id: str, text: str, now: int) -> None:
    """Record that relay itself made (or may make) the runtime submit ``text``."""
    hashes = store.hook_own_prompts(session_id)
    hashes.append(prompt_hash(text))
    store.set_hook_own_prompts(session_id, hashes[-MAX_OWN_PROMPTS:], now)


def _candidates(prompt: str) -> list[str]:
    """The prompt itself and each text inside it that starts and ends as relay's own texts
    do (a wake turn can wrap relay's note, as Claude Code's task-notification does)."""
    out = [prompt, prompt.strip()]
    starts = sorted(i for m in OWN_STARTS for i in _find_all(prompt, m))[:20]
    ends = sorted(j + len(m) for m in OWN_ENDS for j in _find_all(prompt, m))[:20]
    out += [prompt[i:j] for i in starts for j in ends if j > i]
    return out


def _find_all(text: str, sub: str) -> list[int]:
    found: list[int] = []
    i = text.find(sub)
    while i != -1 and len(found) < 20:
        found.append(i)
        i = text.find(sub, i + 1)
    return found


def own_prompt(store: HookStore, session_id: str, ev: Event) -> bool:
    """The prompt is, or carries, a text relay itself made the runtime submit: a Stop
    block's reason (Gemini CLI resubmits it), a waiter's note (`codex queue` delivers it as
    a prompt; Claude Code's wake turn carries it in a task-notification)."""
    if not ev.prompt:
        return False
    own = set(store.hook_own_prompts(session_id))
    return bool(own) and any(prompt_hash(c) in own for c in _candidates(ev.prompt))


def from_another_session(ev: Event) -> bool:
    """The prompt is a message from another Claude session (SendMessage), not a person's."""
    return ev.prompt is not None and ev.prompt.lstrip().startswith(OTHER_SESSION_TAGS)


def _stored_marks(store: HookStore, session_id: str) -> tuple[int, dict[str, list[str]]]:
    """(the session's Stop-block count, its marks: named, pending, told)."""
    state = store.get_hook_state(session_id)
    return (state["stop_blocks"] if state is not None else 0), store.hook_marks(session_id)


def mark(marks: dict[str, list[str]], key: str, ids: list[str]) -> None:
    """Add ``ids`` to one list of marks, newest last (each id once)."""
    marks[key] = [i for i in marks[key] if i not in set(ids)] + list(ids)


def _arrived(store: HookStore, session_id: str, prompt: str, now: int) -> None:
    """A turn that carries relay's queued note arrived: its pending ids reached the model
    (the note names each by its shortest unique prefix, at least SHOWN_ID characters)."""
    blocks, marks = _stored_marks(store, session_id)
    arrived = [i for i in marks["pending"] if i[: announce.SHOWN_ID] in prompt]
    if not arrived:
        return
    marks["pending"] = [i for i in marks["pending"] if i not in set(arrived)]
    mark(marks, "named", arrived)
    mark(marks, "told", arrived)
    store.put_hook_marks(session_id, blocks, marks, now, MAX_REMEMBERED_IDS)


def _prompt_submit(
    store: Store, now: int, session: Row, ev: Event, dialect: Runtime
) -> JsonObject | None:
    if session["state"] != "active":
        return _context_doc(ev.runtime_name, _ended_note(store, session, dialect), dialect)
    caller = peers.session_caller(store, session)
    name = caller.name
    peers.renew(store, caller, now)
    sid = session["id"]
    if (
        ev.source in PERSON_SOURCES
        and not own_prompt(store, sid, ev)
        and not from_another_session(ev)
    ):
        store.put_hook_marks(sid, 0, store.hook_marks(sid), now, MAX_REMEMBERED_IDS)
    if ev.prompt and OWN_STARTS[0] in ev.prompt:
        # A turn carrying relay's note (also one whose wrapper changed it past
        # recognition): the pending ids it names reached the model.
        _arrived(store, sid, ev.prompt, now)
    parts = []
    listing = _listing(store, now, sid, name)
    if listing:
        parts.append(listing)
    rows = store.hook_unnotified(name, MAX_NOTICES)
    if rows:
        # a batch of the hook's own: `notices --again` shows the `notices` command's
        store.mark_notified([r["id"] for r in rows], now, new_batch())
        shown = announce.shortest_prefixes(store, [r["id"] for r in rows])
        parts.append(announce.notice(name, [(shown[r["id"]], r) for r in rows]))
    return _context_doc(ev.runtime_name, "\n".join(parts), dialect) if parts else None


def _listing(store: Store, now: int, session_id: str, name: str) -> str:
    """A prompt's listing (design.md §12): the queued requests of ``name`` this session
    was not told of and no queued note of relay's carries, at most MAX_LINES of them
    (marked told); '' when there are none -- an unchanged set is not announced again."""
    blocks, marks = _stored_marks(store, session_id)
    waiting = store.hook_queued(name, MAX_SCANNED)
    known = set(marks["told"]) | set(marks["pending"])
    new = [r for r in waiting if r["id"] not in known]
    if not new:
        return ""
    shown = announce.named(store, new[: announce.MAX_LINES])
    more = _more(store, name, waiting, len(new)) - len(shown)
    mark(marks, "told", [r.id for r in shown])
    store.put_hook_marks(session_id, blocks, marks, now, MAX_REMEMBERED_IDS)
    return announce.listing(name, shown, more, _count(store, name, len(waiting)))


def _stop(store: Store, now: int, session: Row, dialect: Runtime) -> JsonObject | None:
    if session["state"] != "active":
        return None
    caller = peers.session_caller(store, session)
    name = caller.name
    peers.renew(store, caller, now)
    sid = session["id"]
    blocks, marks = _stored_marks(store, sid)
    named = set(marks["named"])
    waiting = store.hook_queued(name, MAX_SCANNED)
    fresh = [r for r in waiting if r["id"] not in named]
    if not fresh or blocks >= MAX_STOP_BLOCKS:
        store.put_hook_marks(sid, 0, marks, now, MAX_REMEMBERED_IDS)
        return None
    told = set(marks["told"])
    untold = [r for r in fresh if r["id"] not in told]
    shown = announce.named(store, untold[: announce.MAX_LINES])
    more = (_more(store, name, waiting, len(fresh)) - len(fresh)) + len(untold) - len(shown)
    ids = [r["id"] for r in fresh]
    mark(marks, "named", ids)
    mark(marks, "told", [r.id for r in shown])
    marks["pending"] = [i for i in marks["pending"] if i not in set(ids)]
    store.put_hook_marks(sid, blocks + 1, marks, now, MAX_REMEMBERED_IDS)
    reason = _cap(announce.stop_block(name, shown, more, len(fresh) - len(untold)))
    remember_own_prompt(store, sid, reason, now)
    if dialect.stop_context:  # (Claude Code: the reason reaches the model twice)
        return {
            "decision": dialect.block,
            "reason": announce.stop_pointer(name),
            "hookSpecificOutput": {"hookEventName": "Stop", "additionalContext": reason},
        }
    return {"decision": dialect.block, "reason": reason}


def _session_end(store: Store, now: int, session: Row) -> None:
    if session["state"] != "active":
        return
    peers.leave(store, peers.session_caller(store, session), now)


# ------------------------------------------------------------------------- helpers
def _count(store: HookStore, name: str, read: int) -> str:
    """How many requests are queued for ``name`` (``read`` rows were read, oldest first)."""
    if read < MAX_SCANNED:
        return str(read)
    n = store.hook_queued_count(name, COUNT_CAP)
    return f"{COUNT_CAP} or more" if n >= COUNT_CAP else str(n)


def _more(store: HookStore, name: str, waiting: list[Row], read_new: int) -> int:
    """How many queued requests of ``name`` are new to the session: ``read_new`` of the
    ``waiting`` rows read (the oldest MAX_SCANNED), plus every queued row beyond them,
    which no text named yet (counted no further than COUNT_CAP)."""
    if len(waiting) < MAX_SCANNED:
        return read_new
    total = store.hook_queued_count(name, COUNT_CAP)
    return read_new + max(0, total - len(waiting))


def _cap(text: str) -> str:
    if len(text) <= MAX_CONTEXT_CHARS:
        return text
    return text[: MAX_CONTEXT_CHARS - 20] + "\n[... shortened]"


def _context_doc(event: str, text: str, dialect: Runtime = runtimes.CLAUDE) -> JsonObject:
    """The context document in the form the runtime reads (``Runtime.context``)."""
    if dialect.context == "top":
        return {"additionalContext": _cap(text)}
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": _cap(text)}}


def lease_seconds(value: str | None) -> int:
    if value is None:
        return DEFAULT_LEASE_S
    return clock.parse_duration(value, SESSION_LEASE, "--lease")
