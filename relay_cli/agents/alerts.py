"""Alerts for the person (design.md §19): a command relay runs when an agent starts
needing a person, or goes ``gone`` or ``turn_failed`` while it holds claimed work.

The command is ``RELAY_NOTIFY`` (split into words as a shell would, never run by a
shell), else the one `relay notify set` stored in the home. A new episode of a session's
activity marks its alert owed (requests/activity.py); ``take`` -- inside the write
transaction of the relay process that sees it -- marks it sent, and ``start`` runs the
command after the commit: detached, so the hook never waits for it, with its standard
streams on /dev/null (the runtime reads the hook's), and the facts in environment
variables, never in its words:

- ``RELAY_ALERT_PEER``, ``RELAY_ALERT_KIND`` (the peer's kind), ``RELAY_ALERT_SESSION``;
- ``RELAY_ALERT_ACTIVITY`` (needs_person, turn_failed, gone) and ``RELAY_ALERT_CAUSE``
  (permission, question, turn_failed, gone);
- ``RELAY_ALERT_SINCE`` (RFC 3339 UTC), ``RELAY_ALERT_HOLDS`` (the ids of the claimed
  requests it holds, or held: a gone session's became delivery_unknown);
- ``RELAY_ALERT_DETAIL`` (the runtime's own words, untrusted: one line, inert) and
  ``RELAY_ALERT_TEXT`` (one sentence for a person); ``RELAY_ALERT_HOME``.

Once per (session, cause, start): an owed alert is taken by one transaction only. With no
command set the alert is taken all the same (a command set later never replays old ones).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ..core import clock
from ..core.errors import RelayError
from ..core.output import inert_line
from ..core.record import record
from ..requests import activity

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)

if TYPE_CHECKING:
    from relay_cli.store import Row, Store

NOTIFY_KEY = "notify"  # the setting `relay notify set` stores: a JSON list of words
NOTIFY_VAR = "RELAY_NOTIFY"
MAX_TAKEN = 20  # owed alerts one relay process starts at most
# what the command does not inherit: the agent's own relay identity
DROPPED = ("RELAY_SESSION", "RELAY_PEER")


@record(frozen=True)
class Alert:
    argv: list[str]
    facts: dict[str, str]


def parse_command(text: str, what: str = NOTIFY_VAR) -> list[str]:
    """``RELAY_NOTIFY``'s words, as a shell would split them (quotes group words); the
    command is run without a shell. ``usage_error`` for an unbalanced quote."""
    import shlex

    try:
        words = shlex.split(text)
    except ValueError as e:
        raise RelayError("usage_error", f"{what} cannot be split into words: {e}") from e
    if not words:
        raise RelayError("usage_error", f"{what} names no command")
    _one_line_words(words, what)
    return words


def _one_line_words(words: list[str], what: str) -> None:
    """A printed command is one line of words (design.md §14), shown as written: a word of
    the alert command with a control character in it (a line break, a tab, an escape,
    NUL) is refused; a script of several lines goes in a file the command names."""
    if any(ch < " " or ch == "\x7f" for w in words for ch in w):
        raise RelayError(
            "usage_error",
            f"a word of {what} holds a control character (a line break, a tab, an escape): "
            "put a script of several lines in a file and name the file",
        )


def unusable(environ: Mapping[str, str]) -> str | None:
    """Why ``RELAY_NOTIFY`` names no command relay runs (None: it is unset, or usable)."""
    raw = environ.get(NOTIFY_VAR)
    if not raw:
        return None
    try:
        parse_command(raw)
    except RelayError as e:
        return e.message
    return None


def stored_command(store: Store) -> list[str] | None:
    raw = store.get_setting(NOTIFY_KEY)
    if raw is None:
        return None
    try:
        words = json.loads(raw)
    except ValueError:
        return None
    if isinstance(words, list) and words and all(isinstance(w, str) for w in words):
        try:
            _one_line_words(words, "the stored command")
        except RelayError:
            return None
        return words
    return None


def command(store: Store, environ: Mapping[str, str]) -> tuple[list[str] | None, str]:
    """(the alert command, where it comes from: ``RELAY_NOTIFY``, ``home`` or ``none``).
    A ``RELAY_NOTIFY`` that cannot be split is no command (a hook never fails on it)."""
    raw = environ.get(NOTIFY_VAR)
    if raw:
        try:
            return parse_command(raw), NOTIFY_VAR
        except RelayError:
            return None, NOTIFY_VAR
    words = stored_command(store)
    return (words, "home") if words else (None, "none")


def facts(store: Store, session: Row, now: int) -> dict[str, str]:
    """The environment variables that carry one alert's facts."""
    act = activity.of_session(session, now)
    sid = session["id"]
    if session["state"] == "active":
        holds = [r["id"] for r in store.in_flight_of_session(sid)]
    else:
        holds = [r["id"] for r in store.work_left_by(sid)]
    peer = store.get_peer(session["peer"])
    cause = act.cause if act.activity == "needs_person" else act.activity
    detail = inert_line(act.detail) if act.detail else ""
    return {
        "RELAY_ALERT_PEER": session["peer"],
        "RELAY_ALERT_KIND": peer["kind"] if peer is not None else "",
        "RELAY_ALERT_SESSION": sid,
        "RELAY_ALERT_ACTIVITY": act.activity,
        "RELAY_ALERT_CAUSE": cause or "",
        "RELAY_ALERT_SINCE": clock.iso(act.since) or "",
        "RELAY_ALERT_HOLDS": " ".join(holds),
        "RELAY_ALERT_DETAIL": detail,
        "RELAY_ALERT_TEXT": sentence(session["peer"], act, holds, detail),
        "RELAY_ALERT_HOME": str(store.home),
    }


def sentence(peer: str, act: activity.Activity, holds: list[str], detail: str) -> str:
    """One line for a person: who, what, and what it holds."""
    n = len(holds)
    work = f"{n} claimed request{'' if n == 1 else 's'}"
    if act.activity == "needs_person":
        text = f"{peer} needs you ({act.cause})"
        return f"{text}: {detail}" if detail else text
    if act.activity == "turn_failed":
        why = f" ({detail})" if detail else ""
        return f"{peer}: its turn failed{why} while it holds {work}"
    return f"{peer} is gone ({act.cause}); the {work} it held became delivery_unknown"


def take(store: Store, environ: Mapping[str, str], now: int) -> list[Alert]:
    """The owed alerts, marked sent (call inside the write transaction; ``start`` them
    after it committed)."""
    rows = store.take_owed_alerts(MAX_TAKEN)
    if not rows:
        return []
    argv, _ = command(store, environ)
    if not argv:
        return []
    return [Alert(argv, facts(store, r, now)) for r in rows]


def child_env(environ: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in environ.items() if k not in DROPPED}
    env.update(extra)
    return env


def start(alerts: list[Alert], environ: Mapping[str, str]) -> None:
    """Run each alert's command detached (nobody waits for it)."""
    if not alerts:
        return
    from ..core.process import spawn_detached

    for a in alerts:
        spawn_detached(a.argv, child_env(environ, a.facts))


# ------------------------------------------------------------------ `relay notify`
def set_command(store: Store, words: list[str], now: int) -> list[str]:
    """Store the alert command in the home (`relay notify set`)."""
    if not words or not words[0]:
        raise RelayError("usage_error", "relay notify set needs a command after `--`")
    _one_line_words(words, "the command")
    store.put_setting(NOTIFY_KEY, json.dumps(words), now)
    return words


def clear_command(store: Store) -> bool:
    """Forget the stored alert command (`relay notify clear`); whether one was stored."""
    return store.delete_setting(NOTIFY_KEY)


def test_facts(home: str, now: int) -> dict[str, str]:
    """What `relay notify test` hands the command: every variable an alert sets, about no
    agent (``RELAY_ALERT_CAUSE`` ``test``)."""
    return {
        "RELAY_ALERT_PEER": "relay-notify-test",
        "RELAY_ALERT_KIND": "",
        "RELAY_ALERT_SESSION": "",
        "RELAY_ALERT_ACTIVITY": "test",
        "RELAY_ALERT_CAUSE": "test",
        "RELAY_ALERT_SINCE": clock.iso(now) or "",
        "RELAY_ALERT_HOLDS": "",
        "RELAY_ALERT_DETAIL": "",
        "RELAY_ALERT_TEXT": "relay notify test: an agent that needs you is named here",
        "RELAY_ALERT_HOME": home,
    }


def run_now(argv: list[str], env: dict[str, str], timeout_s: float) -> tuple[int | None, str]:
    """Run the command in the foreground (`relay notify test`), in a session of its own
    (``process.run_bounded``): (its exit status -- the shell's 127/126 when it cannot
    start, -N for a signal --, the end of what it wrote on stderr). (None, ...) when it
    still ran after ``timeout_s``: then it and everything it started were ended (a real
    alert is never waited for, nor ended)."""
    import subprocess

    from ..core.errors import NOT_EXECUTABLE_EXIT, NOT_FOUND_EXIT
    from ..core.process import run_bounded

    try:
        done = run_bounded(argv, timeout=timeout_s, env=env, capture=False)
    except subprocess.TimeoutExpired as e:
        return None, _tail(e.stderr)
    except FileNotFoundError:
        return int(NOT_FOUND_EXIT), ""
    except OSError:
        return int(NOT_EXECUTABLE_EXIT), ""
    return done.returncode, _tail(done.stderr)


def _tail(data: bytes | str | None, lines: int = 5) -> str:
    """The last ``lines`` lines of a program's stderr, inert (another program's words)."""
    if not data:
        return ""
    text = data.decode(errors="replace") if isinstance(data, bytes) else data
    return "\n".join(inert_line(ln) for ln in text.rstrip("\n").splitlines()[-lines:])
