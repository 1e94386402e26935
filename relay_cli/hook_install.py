"""`relay hook install|uninstall claude|codex|gemini` (design.md §12).

Merges relay's hook entries into the runtime's own settings file and takes them out again:

- Claude Code: ``~/.claude/settings.json`` (``$CLAUDE_CONFIG_DIR/settings.json`` when set;
  ``--project``: ``.claude/settings.json`` in the current directory), key ``hooks``.
- Codex: ``~/.codex/hooks.json`` (``$CODEX_HOME/hooks.json``; ``--project``:
  ``.codex/hooks.json``, read by Codex only in a project it trusts), key ``hooks``.
- Gemini CLI: ``~/.gemini/settings.json`` (``$GEMINI_CLI_HOME/.gemini/settings.json``;
  ``--project``: ``.gemini/settings.json``), key ``hooks``; timeouts in milliseconds.

Every other key and every other hook stays as it was. Relay's entries are recognised by
their command (``relay hook RUNTIME`` or ``relay hook RUNTIME --wake``, ``relay`` possibly
as an absolute path), each in a matcher group of its own, so uninstall removes exactly them
(and a group, event list or ``hooks`` object only when it emptied it). A second install
changes nothing. A file that is not valid JSON (or whose ``hooks`` is not an object of
lists) is refused, unchanged, with ``usage_error``; a file that cannot be read or written is
``storage_error``. Before a change the file is copied to ``FILE.relay-backup-<UTC time>``;
the new content is written to a temporary file in the same directory, flushed, given the
old file's mode and renamed over it (a symlinked settings file is written through the link).
"""

from __future__ import annotations

import json
import os
import shlex
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import RelayError

RUNTIMES = ("claude", "codex", "gemini")
DISPLAY = {"claude": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI"}
HOOK_TIMEOUT_S = 10
CODEX_SESSION_END_TIMEOUT_S = 3  # Codex 0.171.0 clamps a longer SessionEnd timeout to 3 s
WAKE_TIMEOUT_S = 3600 + 60  # the waiter's own 1 h timeout ends it first
NEW_FILE_MODE = 0o600


@dataclass(frozen=True)
class Entry:
    """One hook handler relay installs."""

    event: str  # the runtime's event name
    role: str  # "hook" (the event handler) or "wake" (the wake waiter)
    handler: dict

    @property
    def command(self) -> str:
        return self.handler["command"]


def _events(runtime: str) -> tuple[str, ...]:
    if runtime == "gemini":
        return ("SessionStart", "BeforeAgent", "AfterAgent", "SessionEnd")
    return ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd")


def entries(runtime: str, wake: bool = True) -> list[Entry]:
    """The handlers relay installs for ``runtime``, in order. The waiter is always part of
    Claude Code's; for Codex only with ``wake`` (opt-in); Gemini CLI has no background hooks."""
    command = f"relay hook {runtime}"
    out = []
    for event in _events(runtime):
        if runtime == "gemini":
            handler = {"name": "relay", "type": "command", "command": command,
                       "timeout": HOOK_TIMEOUT_S * 1000}
        else:
            timeout = (CODEX_SESSION_END_TIMEOUT_S if runtime == "codex"
                       and event == "SessionEnd" else HOOK_TIMEOUT_S)
            handler = {"type": "command", "command": command, "timeout": timeout}
        out.append(Entry(event, "hook", handler))
        if event in ("SessionStart", "Stop") and (runtime == "claude" or
                                                   (runtime == "codex" and wake)):
            background = {"asyncRewake": True} if runtime == "claude" else {"async": True}
            out.append(Entry(event, "wake", {"type": "command", "command": f"{command} --wake",
                                             "timeout": WAKE_TIMEOUT_S, **background}))
    return out


def fragment(runtime: str, wake: bool = True) -> dict:
    """The settings fragment install merges in (shown by the docs for a manual install)."""
    hooks: dict[str, list] = {}
    for e in entries(runtime, wake):
        hooks.setdefault(e.event, []).append({"hooks": [dict(e.handler)]})
    return {"hooks": hooks}


def settings_path(runtime: str, project: bool, environ=None, cwd: str | None = None) -> Path:
    environ = os.environ if environ is None else environ
    base = Path(cwd or os.getcwd())
    home = Path(environ.get("HOME") or os.path.expanduser("~"))
    if runtime == "claude":
        if project:
            return base / ".claude" / "settings.json"
        config = environ.get("CLAUDE_CONFIG_DIR")
        return (Path(config) if config else home / ".claude") / "settings.json"
    if runtime == "codex":
        if project:
            return base / ".codex" / "hooks.json"
        codex_home = environ.get("CODEX_HOME")
        return (Path(codex_home) if codex_home else home / ".codex") / "hooks.json"
    if project:
        return base / ".gemini" / "settings.json"
    gemini_home = environ.get("GEMINI_CLI_HOME")
    return (Path(gemini_home) if gemini_home else home) / ".gemini" / "settings.json"


def relay_role(handler, runtime: str) -> str | None:
    """"hook" or "wake" when ``handler`` is one of relay's for ``runtime``, else None."""
    if not isinstance(handler, dict) or handler.get("type") != "command":
        return None
    command = handler.get("command")
    if not isinstance(command, str):
        return None
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    if len(argv) < 3 or os.path.basename(argv[0]) != "relay" or argv[1:3] != ["hook", runtime]:
        return None
    rest = argv[3:]
    if rest == ["--wake"]:
        return "wake"
    return "hook" if not rest else None


# ------------------------------------------------------------------------ the change
@dataclass
class Change:
    runtime: str
    path: Path
    install: bool
    doc: dict
    original: bytes | None  # None: the file does not exist
    added: list[dict]
    removed: list[dict]
    present: list[dict]

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed)


def _refuse(path: Path, why: str) -> RelayError:
    return RelayError("usage_error", f"{path}: {why}; nothing was changed",
                      detail=f"fix {path} or move it aside, then run the command again")


class _NotWritableBack(ValueError):
    """A value in the file that relay could not write back as the same JSON."""


def _not_json(name: str):
    """``NaN``, ``Infinity``, ``-Infinity``: Python's reader takes them, JSON has none."""
    raise _NotWritableBack(f"holds {name}, which is not JSON")


def _finite_float(text: str) -> float:
    """A JSON number; one beyond a double's range (``1e999``) would be written back as
    ``Infinity``, which is not JSON, so the file is refused instead."""
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _NotWritableBack(f"holds the number {text[:40]}, larger than relay can write "
                               "back exactly")
    return value


def _load(path: Path) -> tuple[dict, bytes | None]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}, None
    except OSError as e:
        raise RelayError("storage_error", f"cannot read {path}: {e.strerror}",
                         detail=f"nothing was changed; check {path}") from e
    if not raw.strip():
        return {}, raw
    try:
        doc = json.loads(raw.decode("utf-8"), parse_constant=_not_json,
                         parse_float=_finite_float)
    except UnicodeDecodeError as e:
        raise _refuse(path, "is not UTF-8 text") from e
    except _NotWritableBack as e:
        raise _refuse(path, str(e)) from e
    except json.JSONDecodeError as e:
        raise _refuse(path, f"is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg}); "
                      "relay does not edit a file it cannot read exactly (comments included)"
                      ) from e
    except RecursionError as e:
        raise _refuse(path, "is nested too deeply to read") from e
    if not isinstance(doc, dict):
        raise _refuse(path, "holds JSON that is not an object")
    hooks = doc.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise _refuse(path, "has a `hooks` value that is not an object")
    return doc, raw


def plan(runtime: str, path: Path, *, install: bool, wake: bool = False) -> Change:
    """What install (or uninstall) would change in ``path``; nothing is written."""
    doc, original = _load(path)
    change = Change(runtime, path, install, doc, original, [], [], [])
    events = _events(runtime)
    hooks = doc.get("hooks")
    for event in events:
        groups = hooks.get(event) if hooks is not None else None
        if groups is not None and not isinstance(groups, list):
            raise _refuse(path, f"has a `hooks.{event}` value that is not a list")
    if install:
        _install(change, wake)
    else:
        _uninstall(change)
    return change


def _handlers(groups) -> list[dict]:
    return [h for g in groups or [] if isinstance(g, dict) and isinstance(g.get("hooks"), list)
            for h in g["hooks"]]


def _install(change: Change, wake: bool) -> None:
    runtime = change.runtime
    hooks = change.doc.get("hooks")
    for e in entries(runtime, wake):
        groups = hooks.get(e.event) if hooks is not None else None
        item = {"event": e.event, "command": e.command}
        if any(relay_role(h, runtime) == e.role for h in _handlers(groups)):
            change.present.append(item)
            continue
        if hooks is None:
            hooks = change.doc["hooks"] = {}
        hooks.setdefault(e.event, []).append({"hooks": [dict(e.handler)]})
        change.added.append(item)


def _uninstall(change: Change) -> None:
    runtime = change.runtime
    hooks = change.doc.get("hooks")
    if hooks is None:
        return
    for event in _events(runtime):
        groups = hooks.get(event)
        if not groups:
            continue
        kept_groups = []
        for group in groups:
            if not (isinstance(group, dict) and isinstance(group.get("hooks"), list)):
                kept_groups.append(group)
                continue
            mine = [h for h in group["hooks"] if relay_role(h, runtime)]
            change.removed += [{"event": event, "command": h["command"]} for h in mine]
            kept = [h for h in group["hooks"] if not relay_role(h, runtime)]
            if mine and not kept:
                continue  # a group that only held relay's handlers goes with them
            if mine:
                group["hooks"] = kept
            kept_groups.append(group)
        if len(kept_groups) != len(groups) or any(r["event"] == event for r in change.removed):
            if kept_groups:
                hooks[event] = kept_groups
            else:
                del hooks[event]
    if change.removed and not hooks:
        del change.doc["hooks"]


# ------------------------------------------------------------------------ writing
def apply(change: Change) -> str | None:
    """Write the change (backup first, then an atomic replace). Returns the backup path."""
    if not change.changed:
        return None
    target = Path(os.path.realpath(change.path)) if change.path.is_symlink() else change.path
    text = json.dumps(change.doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    try:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        backup = None
        mode = NEW_FILE_MODE
        if change.original is not None:
            mode = os.stat(target).st_mode & 0o7777
            backup = _backup(target, change.original, mode)
        _replace(target, text.encode("utf-8"), mode)
    except OSError as e:
        raise RelayError("storage_error", f"cannot write {target}: {e.strerror or e}",
                         detail=f"{target} was not changed") from e
    return str(backup) if backup else None


def _backup(target: Path, data: bytes, mode: int) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for n in range(100):
        path = target.with_name(f"{target.name}.relay-backup-{stamp}" + (f"-{n}" if n else ""))
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode & 0o777)
        except FileExistsError:
            continue
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        return path
    raise FileExistsError(f"too many backups of {target} this second")


def _replace(target: Path, data: bytes, mode: int) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.relay-", dir=target.parent)
    try:
        try:
            _write_all(fd, data)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dfd = os.open(target.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
    os.fsync(fd)


# ------------------------------------------------------------------------ advice
def change_settings(runtime: str, *, install: bool, project: bool = False,
                    dry_run: bool = False, wake: bool = False) -> dict:
    """`relay hook install|uninstall RUNTIME`: plan the change of the runtime's settings
    file, apply it unless ``dry_run``, and say what changed and what is left to do.

    An unknown runtime, or ``--wake`` for Gemini CLI (it has no background hooks), is a
    ``usage_error``; nothing is read or written then.
    """
    import shutil

    if runtime not in RUNTIMES:
        raise RelayError("usage_error", f"AGENT must be one of {', '.join(RUNTIMES)}, not "
                         f"{runtime!r}")
    if wake and runtime == "gemini":
        raise RelayError("usage_error", "Gemini CLI has no background hooks: relay cannot wake "
                         "an idle Gemini session (--wake is for claude and codex)")
    path = settings_path(runtime, project)
    change = plan(runtime, path, install=install, wake=wake)
    backup = None if dry_run else apply(change)
    return {"agent": runtime, "file": str(path), "changed": change.changed, "dry_run": dry_run,
            "created": change.changed and change.original is None, "backup": backup,
            "added": change.added, "removed": change.removed, "unchanged": change.present,
            "todo": todo(runtime, install=install, wake=wake, project=project,
                         relay_on_path=shutil.which("relay") is not None)}


def todo(runtime: str, *, install: bool, wake: bool, project: bool,
         relay_on_path: bool) -> list[str]:
    """What the person still has to do after (un)installing."""
    name = DISPLAY[runtime]
    if not install:
        return [f"Restart {name}: a running session keeps the hooks it started with."]
    out = []
    if runtime == "claude":
        out.append("Restart Claude Code, and give each session its peer name: "
                   "`RELAY_PEER=NAME claude` (Claude Code's CLAUDE_ENV_FILE carries the "
                   "session to its shell commands), or `relay run --as NAME --kind claude -- "
                   "claude`.")
        out.append("Check with `relay peers list`: wakeup says `hook` after the first prompt "
                   "and `waiter` while the session is idle.")
    elif runtime == "codex":
        out.append("Codex asks you to review new hooks when it starts (\"Hooks need review\"): "
                   "trust relay's hooks there, or they do not run.")
        if project:
            out.append("Codex reads .codex/hooks.json only in a project it trusts.")
        out.append("Start Codex as `relay run --as NAME --kind codex -- codex`: Codex 0.171.0 "
                   "gives hooks no env file, so the launcher carries the relay session.")
        if not wake:
            out.append("Optional: `relay hook install codex --wake` adds a waiter that wakes an "
                       "idle session with `codex queue`; relay's note then arrives as a user "
                       "turn (it says it comes from relay, not the user).")
    else:
        out.append("Start Gemini CLI as `relay run --as NAME --kind gemini -- gemini`: it gives "
                   "hooks no env file, so the launcher carries the relay session.")
        out.append("Gemini CLI runs hooks only in folders you trust (its folder-trust prompt).")
        out.append("Gemini CLI has no background hooks: relay cannot wake an idle Gemini "
                   "session; it hears of requests at its next prompt or answer.")
    if not relay_on_path:
        out.append("`relay` is not on this PATH: the runtime must find `relay` on its PATH, or "
                   "edit the hook commands to relay's absolute path.")
    return out
