"""`relay hook install|uninstall claude|codex|gemini|opencode|copilot` (design.md §12).

Merges relay's hook entries into the runtime's own settings file and takes them out again:

- Claude Code: ``~/.claude/settings.json`` (``$CLAUDE_CONFIG_DIR/settings.json`` when set;
  ``--project``: ``.claude/settings.json`` in the current directory), key ``hooks``.
- Codex: ``~/.codex/hooks.json`` (``$CODEX_HOME/hooks.json``; ``--project``:
  ``.codex/hooks.json``, read by Codex only in a project it trusts), key ``hooks``.
- Gemini CLI: ``~/.gemini/settings.json`` (``$GEMINI_CLI_HOME/.gemini/settings.json``;
  ``--project``: ``.gemini/settings.json``), key ``hooks``; timeouts in milliseconds.
- GitHub Copilot CLI: ``~/.copilot/hooks/relay.json`` (``$COPILOT_HOME/hooks/relay.json``;
  ``--project``: ``.github/hooks/relay.json``), relay's own file among the hook files
  Copilot CLI combines, key ``hooks``, in Claude Code's format.

- opencode: no settings are merged: relay writes a plugin file of its own,
  ``~/.config/opencode/plugins/relay.js`` (``$XDG_CONFIG_HOME/opencode/plugins/relay.js``;
  ``--project``: ``.opencode/plugins/relay.js``), see ``opencode_plugin`` and
  :func:`plan_plugin`.

Every other key and every other hook stays as it was. Relay's entries are recognised by
their command (``relay hook RUNTIME`` or ``relay hook RUNTIME --wake``, ``relay`` possibly
as an absolute path), each in a matcher group of its own, so uninstall removes exactly them
(and a group, event list or ``hooks`` object only when it emptied it). A second install
changes nothing. A file that is not valid JSON (or whose ``hooks`` is not an object of
lists) is refused, unchanged, with ``usage_error``; a file that cannot be read or written is
``storage_error``. Every file is reached, read and written by one rule (``own_files``): no
link below the project or user directory is followed, relay writes only into directories
and files of the caller's, and the new content replaces the file only while it is the one
that was read. Before a change the file is copied to ``FILE.relay-backup-<UTC time>``; the
new content is written to a temporary file in the same directory, flushed, given the old
file's mode and renamed over it. A runtime's variable that is not an absolute path is
ignored, as the XDG rule says of its own (the output says so).
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypedDict

from ..core.errors import RelayError
from ..core.limits import MAX_SETTINGS_BYTES, WAKE_TIMEOUT_S
from ..core.record import record
from . import own_files, runtimes
from .own_files import Current, Place

if TYPE_CHECKING:
    from ..core.output import JsonObject

RUNTIMES = runtimes.NAMES
DISPLAY: dict[str, str] = {r.name: r.display for r in runtimes.ALL}


@record(frozen=True)
class Entry:
    """One hook handler relay installs."""

    event: str  # the runtime's event name
    role: str  # "hook" (the event handler) or "wake" (the wake waiter)
    handler: JsonObject  # as written to the settings file
    matcher: str | None = None  # its matcher group's matcher, if it needs one

    @property
    def command(self) -> str:
        command: str = self.handler["command"]
        return command


def _events(runtime: str) -> tuple[str, ...]:
    rt = runtimes.BY_NAME[runtime]
    return (*rt.events, *rt.observes)


def relay_command(relay_path: str | None = None) -> str:
    """How the hook commands name relay: its absolute path when given, else `relay`."""
    return shlex.quote(relay_path) if relay_path else "relay"


def entries(runtime: str, wake: bool = True, relay_path: str | None = None) -> list[Entry]:
    """The handlers relay installs for ``runtime``, in order. The waiter comes with a
    runtime that wakes by default (Claude Code), with ``wake`` for one where it is opt-in
    (Codex); a runtime with no background hooks (Gemini CLI) has none."""
    rt = runtimes.BY_NAME[runtime]
    command = f"{relay_command(relay_path)} hook {runtime}"
    out = []
    for event, relay_event in rt.events.items():
        handler: JsonObject = {
            **rt.handler_extra,
            "type": "command",
            "command": command,
            "timeout": rt.timeout(relay_event),
        }
        out.append(Entry(event, "hook", handler))
        if rt.wake and relay_event in rt.wake_events and (rt.wake_by_default or wake):
            out.append(
                Entry(
                    event,
                    "wake",
                    {
                        **rt.handler_extra,
                        "type": "command",
                        "command": f"{command} --wake",
                        "timeout": WAKE_TIMEOUT_S * rt.timeout_scale,
                        **rt.wake_flags,
                    },
                )
            )
    # the events relay only observes (design.md §19): each handler prints nothing
    for event, relay_event in rt.observes.items():
        handler = {
            **rt.handler_extra,
            "type": "command",
            "command": command,
            "timeout": rt.timeout(relay_event),
            **rt.observe_flags.get(event, {}),
        }
        out.append(Entry(event, "hook", handler, rt.observe_matchers.get(event)))
    return out


def _group(e: Entry) -> JsonObject:
    """The matcher group that holds one of relay's handlers."""
    group: JsonObject = {"matcher": e.matcher} if e.matcher else {}
    group["hooks"] = [dict(e.handler)]
    return group


def plugin_text(runtime: str, relay_path: str | None = None) -> str:
    """The plugin file relay writes for a runtime whose install kind is "plugin"."""
    from . import opencode_plugin

    rt = runtimes.BY_NAME[runtime]
    return opencode_plugin.text(relay_path or "relay", rt.timeout("UserPromptSubmit"))


def fragment(runtime: str, wake: bool = True) -> JsonObject:
    """The settings fragment install merges in (shown by the docs for a manual install)."""
    hooks: dict[str, list[JsonObject]] = {}
    for e in entries(runtime, wake):
        hooks.setdefault(e.event, []).append(_group(e))
    return {"hooks": hooks}


def settings_path(
    runtime: str, project: bool, environ: Mapping[str, str], cwd: str | None = None
) -> Path:
    """The runtime's settings file: the project's, or the user's (HOME and the runtime's
    own variable read from the call's ``environ``)."""
    return settings_place(runtime, project, environ, cwd)[0].path


def settings_place(
    runtime: str, project: bool, environ: Mapping[str, str], cwd: str | None = None
) -> tuple[Place, list[str]]:
    """Where the runtime's settings file is, as a :class:`own_files.Place` anchored at the
    project directory or at the user's directory (HOME, or the directory the runtime's
    variable names); and the variables ignored because they are not absolute paths (as
    the XDG rule says of its own: a relative one would name another directory in every
    working directory)."""
    s = runtimes.BY_NAME[runtime].settings
    if project:
        return own_files.place_under(Path(cwd or os.getcwd()), tuple(s.project_file.split("/"))), []
    ignored = []
    moved = environ.get(s.var) if s.var else None
    if moved and not os.path.isabs(moved):
        ignored.append(f"{s.var}={moved}")
        moved = None
    home = environ.get("HOME", "")
    if not os.path.isabs(home):
        import pwd

        home = pwd.getpwuid(os.getuid()).pw_dir
    if moved and s.var_holds_user_dir:
        return own_files.place_under(Path(moved), tuple(s.user_file.split("/"))), ignored
    base = Path(moved or home)  # $VAR stands for HOME (Gemini CLI), or is not set
    return own_files.place_under(base, (s.user_dir, *s.user_file.split("/"))), ignored


def relay_role(handler: object, runtime: str) -> str | None:
    """ "hook" or "wake" when ``handler`` is one of relay's for ``runtime``, else None."""
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
class Handled(TypedDict):
    """One of relay's handlers a change added, removed or found present."""

    event: str
    command: str


@record
class Change:
    runtime: str
    place: Place
    install: bool
    doc: JsonObject  # the settings file's JSON
    current: Current  # what the file held when read
    added: list[Handled]
    removed: list[Handled]
    present: list[Handled]

    @property
    def path(self) -> Path:
        return self.place.path

    @property
    def original(self) -> bytes | None:
        """The file's bytes when read; None: it does not exist."""
        return self.current.data

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed)


def _refuse(path: Path, why: str) -> RelayError:
    return RelayError(
        "usage_error",
        f"{path}: {why}; nothing was changed",
        hint=f"relay edits only a settings file that is valid JSON: fix {path} "
        "or move it aside, then run the command again",
    )


class _NotWritableBack(ValueError):
    """A value in the file that relay could not write back as the same JSON."""


def _not_json(name: str) -> NoReturn:
    """``NaN``, ``Infinity``, ``-Infinity``: Python's reader takes them, JSON has none."""
    raise _NotWritableBack(f"holds {name}, which is not JSON")


def _finite_float(text: str) -> float:
    """A JSON number; one beyond a double's range (``1e999``) would be written back as
    ``Infinity``, which is not JSON, so the file is refused instead."""
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _NotWritableBack(
            f"holds the number {text[:40]}, larger than relay can write back exactly"
        )
    return value


def _load(place: Place) -> tuple[JsonObject, Current]:
    current = own_files.read(place, MAX_SETTINGS_BYTES)
    raw, path = current.data, place.path
    if raw is None:
        return {}, current
    if not raw.strip():
        return {}, current
    try:
        doc = json.loads(raw.decode("utf-8"), parse_constant=_not_json, parse_float=_finite_float)
    except UnicodeDecodeError as e:
        raise _refuse(path, "is not UTF-8 text") from e
    except _NotWritableBack as e:
        raise _refuse(path, str(e)) from e
    except json.JSONDecodeError as e:
        raise _refuse(
            path,
            f"is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg}); "
            "relay does not edit a file it cannot read exactly (comments included)",
        ) from e
    except RecursionError as e:
        raise _refuse(path, "is nested too deeply to read") from e
    if not isinstance(doc, dict):
        raise _refuse(path, "holds JSON that is not an object")
    hooks = doc.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise _refuse(path, "has a `hooks` value that is not an object")
    return doc, current


def plan(
    runtime: str, place: Place, *, install: bool, wake: bool = False, relay_path: str | None = None
) -> Change:
    """What install (or uninstall) would change in the file at ``place``; nothing is
    written. ``relay_path``: the hook commands name relay by that absolute path."""
    doc, current = _load(place)
    path = place.path
    change = Change(runtime, place, install, doc, current, [], [], [])
    events = _events(runtime)
    hooks = doc.get("hooks")
    for event in events:
        groups = hooks.get(event) if hooks is not None else None
        if groups is not None and not isinstance(groups, list):
            raise _refuse(path, f"has a `hooks.{event}` value that is not a list")
    if install:
        _install(change, wake, relay_path)
    else:
        _uninstall(change)
    return change


def _handlers(groups: list[Any] | None) -> list[Any]:
    return [
        h
        for g in groups or []
        if isinstance(g, dict) and isinstance(g.get("hooks"), list)
        for h in g["hooks"]
    ]


def _install(change: Change, wake: bool, relay_path: str | None = None) -> None:
    runtime = change.runtime
    hooks = change.doc.get("hooks")
    for e in entries(runtime, wake, relay_path):
        groups = hooks.get(e.event) if hooks is not None else None
        item: Handled = {"event": e.event, "command": e.command}
        if any(relay_role(h, runtime) == e.role for h in _handlers(groups)):
            change.present.append(item)
            continue
        if hooks is None:
            hooks = change.doc["hooks"] = {}
        hooks.setdefault(e.event, []).append(_group(e))
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
            change.removed += [Handled(event=event, command=h["command"]) for h in mine]
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


# ------------------------------------------------------------------------ a plugin file
def plan_plugin(
    runtime: str, place: Place, *, install: bool, relay_path: str | None = None
) -> Change:
    """What install (or uninstall) would do to relay's plugin file at ``place``; nothing
    is written. Relay's file is recognised by its first line (``opencode_plugin.MARKER``):
    any other file there, a link, or anything but a regular file is refused unchanged
    (``own_files``); uninstall removes only relay's file. ``change.doc["text"]`` holds
    the new content (None: the file is removed)."""
    from . import opencode_plugin

    path = place.path
    current = own_files.read(place, MAX_SETTINGS_BYTES)
    original = current.data
    if original is not None and not opencode_plugin.is_relays(original):
        raise RelayError(
            "usage_error",
            f"{path}: is not relay's plugin (its first line is not "
            f"{opencode_plugin.MARKER!r}); nothing was changed",
            hint=f"move {path} aside (or give it another name) and run the command again",
        )
    relay_cmd = relay_path or "relay"
    item: Handled = {"event": "plugin", "command": f"{relay_command(relay_path)} hook {runtime}"}
    text = plugin_text(runtime, relay_cmd)
    change = Change(runtime, place, install, {"text": text}, current, [], [], [])
    if install:
        if original == text.encode("utf-8"):
            change.present.append(item)
        else:
            change.added.append(item)
            if original is not None:
                change.removed.append({"event": "plugin", "command": "relay's previous plugin"})
    elif original is not None:
        change.doc["text"] = None
        change.removed.append(
            {"event": "plugin", "command": f"{_plugin_relay(original)} hook {runtime}"}
        )
    return change


def _plugin_relay(data: bytes) -> str:
    """How an installed plugin names relay (its ``const RELAY = "..."`` line)."""
    for line in data.decode("utf-8", "replace").splitlines():
        if line.startswith("const RELAY = "):
            try:
                return relay_command(json.loads(line[len("const RELAY = ") :]))
            except ValueError:
                break
    return "relay"


# ------------------------------------------------------------------------ writing
def apply(change: Change) -> str | None:
    """Write the change by ``own_files``' rule (backup first, then an atomic replace of
    the file that was read). Returns the backup path. A plugin file (relay's own) is
    replaced or removed without a backup."""
    if not change.changed:
        return None
    if runtimes.BY_NAME[change.runtime].install_kind == "plugin":
        text = change.doc["text"]
        if text is None:
            own_files.remove(change.place, change.current)
        else:
            own_files.write(change.place, text.encode("utf-8"), change.current, backup=False)
        return None
    text = json.dumps(change.doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    backup = own_files.write(change.place, text.encode("utf-8"), change.current, backup=True)
    return str(backup) if backup else None


# ------------------------------------------------------------------------ advice
def running_relay() -> str | None:
    """The absolute path of the relay program running now, when it is one (not
    `python -m relay_cli`)."""
    import sys

    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) != "relay":
        return None
    path = os.path.abspath(argv0)
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def hook_relay_path(environ: Mapping[str, str]) -> tuple[str | None, bool]:
    """(the absolute path the hook commands should name, or None for a bare `relay`;
    whether a `relay` is on PATH). A bare `relay` works only when the runtime finds this
    relay on its PATH (the call's ``environ``'s); when PATH has no relay, or another one,
    the commands name the running relay by its absolute path."""
    import shutil

    on_path = shutil.which("relay", path=environ.get("PATH"))
    mine = running_relay()
    if mine is None or (on_path and os.path.realpath(on_path) == os.path.realpath(mine)):
        return None, on_path is not None
    return mine, on_path is not None


def change_settings(
    runtime: str,
    *,
    install: bool,
    environ: Mapping[str, str],
    project: bool = False,
    dry_run: bool = False,
    wake: bool = False,
) -> JsonObject:
    """`relay hook install|uninstall RUNTIME`: plan the change of the runtime's settings
    file, apply it unless ``dry_run``, and say what changed and what is left to do. The
    settings file, PATH and the runtime's version are found in the call's ``environ``.

    An unknown runtime, or ``--wake`` for a runtime with no background hooks, is a
    ``usage_error``; nothing is read or written then. A settings file that cannot be
    changed by ``own_files``' rule (a link there or on the way, another user's file or
    directory, read-only, not a regular file) is ``storage_error``, also with
    ``--dry-run``.
    """
    rt = runtimes.get(runtime)
    if rt is None:
        raise RelayError(
            "usage_error", f"AGENT must be one of {', '.join(RUNTIMES)}, not {runtime!r}"
        )
    if wake and rt.wake is None:
        raise RelayError(
            "usage_error",
            f"{rt.display} has no background hooks: relay cannot "
            f"wake an idle {rt.display} session (--wake is for "
            f"{' and '.join(r.name for r in runtimes.ALL if r.wake)})",
        )
    place, ignored = settings_place(runtime, project, environ)
    path = place.path
    relay_path, on_path = hook_relay_path(environ) if install else (None, True)
    version = None
    if rt.install_kind == "plugin":
        if install:
            version = check_runtime_version(rt, environ)
        change = plan_plugin(runtime, place, install=install, relay_path=relay_path)
    else:
        change = plan(runtime, place, install=install, wake=wake, relay_path=relay_path)
    if change.changed:
        own_files.check(place, change.current)
    backup = None if dry_run else apply(change)
    notes = todo(
        runtime,
        install=install,
        wake=wake,
        project=project,
        relay_on_path=on_path,
        relay_path=relay_path,
    )
    for var in ignored:
        notes.append(
            f"{var} is not an absolute path, so relay ignored it (as the XDG rule says) and "
            f"used {path}: {rt.display} may read another directory in each working directory."
        )
    if install and rt.install_kind == "plugin" and version is None:
        notes.append(
            f"`{rt.program} --version` did not answer on this PATH, so relay could not check "
            f"the version: its plugin is written for {rt.display} "
            f"{rt.checked.split('.')[0]}.x (checked with {rt.checked})."
        )
    return {
        "agent": runtime,
        "file": str(path),
        "changed": change.changed,
        "dry_run": dry_run,
        "created": change.changed and change.original is None,
        "backup": backup,
        "added": change.added,
        "removed": change.removed,
        "unchanged": change.present,
        "relay": relay_path or "relay",
        "todo": notes,
    }


VERSION_TIMEOUT_S = 15  # how long `PROGRAM --version` may take


def runtime_version(rt: runtimes.Runtime, environ: Mapping[str, str]) -> str | None:
    """The version `PROGRAM --version` prints (its last word), or None when the program is
    not on PATH or does not answer within VERSION_TIMEOUT_S (run in the call's
    ``environ``; at the timeout everything it started is killed, ``process.run_bounded``)."""
    import re
    import shutil
    import subprocess

    from ..core.process import run_bounded

    program = shutil.which(rt.program, path=environ.get("PATH"))
    if program is None:
        return None
    try:
        p = run_bounded([program, "--version"], timeout=VERSION_TIMEOUT_S, env=environ)
    except (OSError, subprocess.SubprocessError):
        return None
    words = p.stdout.decode("utf-8", "replace").split()
    if p.returncode != 0 or not words or not re.fullmatch(r"v?\d+(\.\d+)*\S*", words[-1]):
        return None
    return words[-1].lstrip("v")


def check_runtime_version(rt: runtimes.Runtime, environ: Mapping[str, str]) -> str | None:
    """Refuse (usage_error, nothing changed) to install relay's plugin for a version of
    the runtime whose plugin shape relay does not know: relay's plugin is written for the
    major version it was checked with (opencode 1.x, checked with 1.18.33)."""
    version = runtime_version(rt, environ)
    if version is None:
        return None
    major = rt.checked.split(".")[0]
    if version.split(".")[0] != major:
        raise RelayError(
            "usage_error",
            f"{rt.display} {version} is not a version relay's plugin is written for "
            f"({rt.display} {major}.x, checked with {rt.checked}); its plugin shape may "
            "differ, so nothing was changed",
            hint=f"install {rt.display} {major}.x (e.g. `npm install -g "
            f"{rt.package.split()[0]}@{rt.checked}`), or wait for a relay that knows "
            f"{rt.display} {version}",
        )
    return version


def todo(
    runtime: str,
    *,
    install: bool,
    wake: bool,
    project: bool,
    relay_on_path: bool,
    relay_path: str | None = None,
) -> list[str]:
    """What the person still has to do after (un)installing: the runtime's own notes
    (``runtimes.Runtime.install_notes``), then where relay is."""
    rt = runtimes.BY_NAME[runtime]
    if not install:
        return [f"Restart {rt.display}: a running session keeps the hooks it started with."]
    out = list(rt.install_notes)
    if project and rt.project_note:
        out.insert(1, rt.project_note)
    if rt.wake and not rt.wake_by_default and not wake and rt.wake_offer:
        out.append(rt.wake_offer)
    if relay_path:
        out.append(
            f"The hook commands name relay by its absolute path, {relay_path}: "
            + (
                "this PATH finds another `relay` first."
                if relay_on_path
                else "`relay` is not on this PATH."
            )
            + " Install again after moving relay."
        )
    elif not relay_on_path:
        out.append(
            "WARNING: `relay` is not on this PATH. The hooks run `relay`: the runtime "
            "must find it on its PATH, or edit the hook commands to relay's absolute "
            "path."
        )
    return out
