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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypedDict

from ..core.errors import RelayError
from ..core.limits import MAX_SETTINGS_BYTES, WAKE_TIMEOUT_S
from . import runtimes

if TYPE_CHECKING:
    from ..core.output import JsonObject

RUNTIMES = runtimes.NAMES
DISPLAY: dict[str, str] = {r.name: r.display for r in runtimes.ALL}
NEW_FILE_MODE = 0o600


@dataclass(frozen=True)
class Entry:
    """One hook handler relay installs."""

    event: str  # the runtime's event name
    role: str  # "hook" (the event handler) or "wake" (the wake waiter)
    handler: JsonObject  # as written to the settings file

    @property
    def command(self) -> str:
        command: str = self.handler["command"]
        return command


def _events(runtime: str) -> tuple[str, ...]:
    return tuple(runtimes.BY_NAME[runtime].events)


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
    return out


def plugin_text(runtime: str, relay_path: str | None = None) -> str:
    """The plugin file relay writes for a runtime whose install kind is "plugin"."""
    from . import opencode_plugin

    rt = runtimes.BY_NAME[runtime]
    return opencode_plugin.text(relay_path or "relay", rt.timeout("UserPromptSubmit"))


def fragment(runtime: str, wake: bool = True) -> JsonObject:
    """The settings fragment install merges in (shown by the docs for a manual install)."""
    hooks: dict[str, list[JsonObject]] = {}
    for e in entries(runtime, wake):
        hooks.setdefault(e.event, []).append({"hooks": [dict(e.handler)]})
    return {"hooks": hooks}


def settings_path(
    runtime: str, project: bool, environ: Mapping[str, str], cwd: str | None = None
) -> Path:
    """The runtime's settings file: the project's, or the user's (HOME and the runtime's
    own variable read from the call's ``environ``)."""
    s = runtimes.BY_NAME[runtime].settings
    if project:
        return Path(cwd or os.getcwd()) / s.project_file
    home = Path(environ.get("HOME") or os.path.expanduser("~"))
    moved = environ.get(s.var) if s.var else None
    if moved and s.var_holds_user_dir:
        return Path(moved) / s.user_file
    return (Path(moved) if moved else home) / s.user_dir / s.user_file


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


@dataclass
class Change:
    runtime: str
    path: Path
    install: bool
    doc: JsonObject  # the settings file's JSON
    original: bytes | None  # None: the file does not exist
    added: list[Handled]
    removed: list[Handled]
    present: list[Handled]

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


def _storage(path: Path, why: str) -> RelayError:
    return RelayError(
        "storage_error",
        f"{path}: {why}; nothing was changed",
        hint=f"relay could not use {path}; fix what the message names (or "
        "edit the file by hand, see docs/agents.md), then run the "
        "command again",
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


def _read(path: Path) -> bytes | None:
    """The file's bytes, or None when it does not exist. Only a regular file is read
    (a FIFO would hang, a device never end), and at most MAX_SETTINGS_BYTES of it."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        return None
    except OSError as e:
        raise _storage(path, f"cannot be read ({e.strerror})") from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _storage(path, "is not a regular file")
        if st.st_size > MAX_SETTINGS_BYTES:
            raise _storage(path, f"is larger than {MAX_SETTINGS_BYTES // (1024 * 1024)} MiB")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            total += len(chunk)
            if total > MAX_SETTINGS_BYTES:
                raise _storage(path, f"is larger than {MAX_SETTINGS_BYTES // (1024 * 1024)} MiB")
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as e:
        raise _storage(path, f"cannot be read ({e.strerror})") from e
    finally:
        os.close(fd)


def check_writable(path: Path) -> None:
    """Refuse (storage_error) to replace a file its owner made read-only, or one owned by
    another user: relay would otherwise rename a new file over it."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as e:
        raise _storage(path, f"cannot be read ({e.strerror})") from e
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        raise _storage(path, "is owned by another user")
    if not st.st_mode & 0o200:
        raise _storage(path, "is read-only (its mode has no write bit for its owner)")


def _load(path: Path) -> tuple[JsonObject, bytes | None]:
    raw = _read(path)
    if raw is None:
        return {}, None
    if not raw.strip():
        return {}, raw
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
    return doc, raw


def plan(
    runtime: str, path: Path, *, install: bool, wake: bool = False, relay_path: str | None = None
) -> Change:
    """What install (or uninstall) would change in ``path``; nothing is written.
    ``relay_path``: the hook commands name relay by that absolute path."""
    doc, original = _load(path)
    change = Change(runtime, path, install, doc, original, [], [], [])
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
    runtime: str, path: Path, *, install: bool, relay_path: str | None = None
) -> Change:
    """What install (or uninstall) would do to relay's plugin file ``path``; nothing is
    written. Relay's file is recognised by its first line (``opencode_plugin.MARKER``):
    any other file there, a symlink, or anything but a regular file is refused
    unchanged; uninstall removes only relay's file. ``change.doc["text"]`` holds the
    new content (None: the file is removed)."""
    from . import opencode_plugin

    if path.is_symlink():
        raise _storage(
            path, "is a symbolic link; relay writes its plugin only as a file of its own"
        )
    original = _read(path)
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
    change = Change(runtime, path, install, {"text": text}, original, [], [], [])
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


def _apply_plugin(change: Change) -> None:
    target = change.path
    check_writable(target)
    try:
        if change.doc["text"] is None:
            target.unlink()
            return
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        mode = os.stat(target).st_mode & 0o7777 if change.original is not None else NEW_FILE_MODE
        _replace(target, change.doc["text"].encode("utf-8"), mode)
    except FileNotFoundError:
        return  # removed meanwhile: what uninstall wanted
    except OSError as e:
        raise RelayError(
            "storage_error",
            f"cannot write {target}: {e.strerror or e}",
            detail=f"{target} was not changed",
        ) from e


# ------------------------------------------------------------------------ writing
def apply(change: Change) -> str | None:
    """Write the change (backup first, then an atomic replace). Returns the backup path.
    A plugin file (relay's own) is replaced or removed without a backup."""
    if not change.changed:
        return None
    if runtimes.BY_NAME[change.runtime].install_kind == "plugin":
        _apply_plugin(change)
        return None
    target = Path(os.path.realpath(change.path)) if change.path.is_symlink() else change.path
    check_writable(target)
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
        raise RelayError(
            "storage_error",
            f"cannot write {target}: {e.strerror or e}",
            detail=f"{target} was not changed",
        ) from e
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
    changed (read-only, another user's, not a regular file) is ``storage_error``, also
    with ``--dry-run``.
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
    path = settings_path(runtime, project, environ)
    relay_path, on_path = hook_relay_path(environ) if install else (None, True)
    version = None
    if rt.install_kind == "plugin":
        if install:
            version = check_runtime_version(rt, environ)
        change = plan_plugin(runtime, path, install=install, relay_path=relay_path)
    else:
        change = plan(runtime, path, install=install, wake=wake, relay_path=relay_path)
    if change.changed:
        check_writable(Path(os.path.realpath(path)))
    backup = None if dry_run else apply(change)
    notes = todo(
        runtime,
        install=install,
        wake=wake,
        project=project,
        relay_on_path=on_path,
        relay_path=relay_path,
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


def runtime_version(rt: runtimes.Runtime, environ: Mapping[str, str]) -> str | None:
    """The version `PROGRAM --version` prints (its last word), or None when the program is
    not on PATH or does not answer within 15 s (run in the call's ``environ``)."""
    import re
    import shutil
    import subprocess

    program = shutil.which(rt.program, path=environ.get("PATH"))
    if program is None:
        return None
    try:
        p = subprocess.run(
            [program, "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=15,
            env=dict(environ),
        )
    except (OSError, subprocess.SubprocessError):
        return None
    words = p.stdout.split()
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
