"""What a runtime's hook event shows of its session (design.md §19): one ``Observation``
per event, read from the runtimes' own shipped formats (tests/fixtures/README.md names
the files and the payloads relied on).

- Claude Code 2.1.332 (its binary's hook metadata; ``sdk.d.ts`` of the Agent SDK):
  ``PermissionRequest`` (``tool_name``; "When a permission dialog is displayed"; it also
  runs in print mode and the SDK before a host decides, where nobody may be asked, so
  there only a ``Notification`` counts), ``Notification`` (``notification_type``:
  ``permission_prompt``, ``worker_permission_prompt``, ``elicitation_dialog``,
  ``elicitation_url_dialog``; ``message``), ``PostToolUse`` (a tool ran),
  ``StopFailure`` (``error``, ``error_details``: "Fires instead of Stop when an API error
  ... ended the turn").
- Codex 0.171.0 (the hook schemas in its binary): ``PermissionRequest`` (``tool_name``),
  ``PostToolUse``. No event for a failed turn or a question.
- Gemini CLI 0.61.0 (``bundle/docs/hooks/reference.md``): ``Notification`` with
  ``notification_type`` ``ToolPermission``, ``message`` and ``details`` (``type``: exec,
  edit, mcp, info, ask_user, ...; ``title``); awaited before the dialog shows.
- opencode 1.18.33: relay's plugin sends ``Notification`` for ``permission.asked``
  (``permission_prompt``) and ``question.asked`` (``elicitation_dialog``), ``PostToolUse``
  for their replies, ``StopFailure`` for ``session.error`` (opencode_plugin.py).
- GitHub Copilot CLI 1.0.102: ``Notification`` (``permission_prompt``: "only fires when a
  prompt is actually shown"; ``elicitation_dialog``; it names the session ``sessionId``),
  ``ErrorOccurred`` ("Hooks that run when a model call fails": ``error`` -- an object
  ``{message, name, stack}`` as the binary sends it --, ``error_context``,
  ``recoverable``; a failed model call ended the turn in the harness although it said
  ``recoverable: true``, so a ``model_call`` error counts as a failed turn).

Every one of them is only recorded: relay's hook prints nothing for it and exits 0, so it
never allows or denies a tool. The runtime's words (a tool name, a question, an error) are
untrusted text: kept as one line, shown inert, never put into a command. This module
imports nothing heavy: the hook's start-up path reads it.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..requests.activity import Observation, one_line

TYPE_CHECKING = False  # (typing's, without importing typing: design.md §18)
if TYPE_CHECKING:
    from typing import Any, Protocol

    from .runtimes import Runtime

    class Event(Protocol):
        """What ``observe`` reads of a hook event (hook.Event)."""

        name: str  # relay's name
        runtime_name: str  # the runtime's
        source: str | None
        extra: dict[str, Any]  # an observed event's fields (``fields``)


PERMISSION_TYPES = ("permission_prompt", "worker_permission_prompt")
QUESTION_TYPES = ("elicitation_dialog", "elicitation_url_dialog")
# Claude Code's built-in tool that asks the person (sdk-tools.d.ts: AskUserQuestionInput)
ASK_TOOLS = ("AskUserQuestion",)
GEMINI_PERMISSION = "ToolPermission"
GEMINI_ASK = "ask_user"


def _str(doc: Mapping[str, Any], key: str, required: bool = False) -> tuple[bool, str | None]:
    """(valid, value) of an optional (or required) string field."""
    value = doc.get(key)
    if value is None:
        return not required, None
    return isinstance(value, str), value if isinstance(value, str) else None


def fields(name: str, doc: Mapping[str, Any]) -> dict[str, Any] | None:
    """The fields relay reads from an observed event (relay's name ``name``), or None when
    one has the wrong type (a hook's bad input: nothing is done)."""
    out: dict[str, Any] = {}
    keys: tuple[tuple[str, bool], ...] = {
        "PermissionRequest": (("tool_name", False),),
        "Notification": (("notification_type", True), ("message", False), ("title", False)),
        "StopFailure": (("error", False), ("error_details", False)),
        "ErrorOccurred": (("error_context", False), ("errorContext", False)),
    }.get(name, ())
    for key, required in keys:
        ok, value = _str(doc, key, required)
        if not ok:
            return None
        out[key] = value
    if name == "Notification":
        details = doc.get("details")
        if details is not None and not isinstance(details, dict):
            return None
        if isinstance(details, dict):
            ok_t, kind = _str(details, "type")
            ok_title, title = _str(details, "title")
            if not (ok_t and ok_title):
                return None
            out["details_type"], out["details_title"] = kind, title
    if name == "ErrorOccurred":
        recoverable = doc.get("recoverable")
        if recoverable is not None and not isinstance(recoverable, bool):
            return None
        out["recoverable"] = recoverable
        # a string in its types, an object {message, name, stack} as 1.0.102 sends it
        error = doc.get("error")
        if isinstance(error, dict):
            ok_m, message = _str(error, "message")
            ok_n, kind = _str(error, "name")
            if not (ok_m and ok_n):
                return None
            error = message or kind
        elif error is not None and not isinstance(error, str):
            return None
        out["error"] = error
    return out


def observe(
    ev: Event, dialect: Runtime, environ: Mapping[str, str], blocked: bool = False
) -> Observation:
    """What ``ev`` shows of its session. ``blocked``: relay's answer to a Stop keeps the
    turn going (a block), so the session is still working."""
    name, raw, f = ev.name, ev.runtime_name, ev.extra
    seen = dialect.hears_answers
    if name == "SessionStart":
        if ev.source == "compact":  # the same running conversation, compacted
            return Observation(None, raw)
        # Codex, opencode and Copilot CLI start a session with its first prompt
        return Observation("working" if dialect.start_in_turn else "idle", raw)
    if name == "UserPromptSubmit":
        return Observation("working", raw)
    if name == "Stop":
        return Observation("working" if blocked else "idle", raw)
    if name == "PermissionRequest":
        if dialect.waits_in_foreground(environ):
            # Claude Code's print mode and SDK: a rule, a hook or a host decides; a host
            # that asks a person says so with a Notification after a while
            return Observation(None, raw)
        tool = one_line(f.get("tool_name"))
        cause = "question" if tool in ASK_TOOLS else "permission"
        return Observation("needs_person", raw, cause, tool, end_seen=seen)
    if name == "Notification":
        kind = f.get("notification_type")
        text = one_line(f.get("message"))
        if kind == GEMINI_PERMISSION:
            cause = "question" if f.get("details_type") == GEMINI_ASK else "permission"
            text = one_line(f.get("details_title")) or text
        elif kind in PERMISSION_TYPES:
            cause = "permission"
        elif kind in QUESTION_TYPES:
            cause = "question"
        else:
            return Observation(None, raw)
        return Observation("needs_person", raw, cause, text, end_seen=seen)
    if name == "PostToolUse":
        return Observation("working", raw, ends_wait_only=True, end_seen=seen)
    if name == "StopFailure":
        error, more = one_line(f.get("error")), one_line(f.get("error_details"))
        detail = one_line(": ".join(w for w in (error, more) if w))
        return Observation("turn_failed", raw, detail=detail)
    if name == "ErrorOccurred":
        where = f.get("error_context") or f.get("errorContext")
        if where != "model_call" and f.get("recoverable") is not False:
            return Observation(None, raw)  # a tool's error, retried or not: the turn goes on
        detail = one_line(": ".join(w for w in (where, f.get("error")) if w))
        return Observation("turn_failed", raw, detail=detail)
    return Observation(None, raw)
