"""The agent runtimes relay's hooks speak to, one entry each (design.md §12).

Everything relay knows about a runtime lives in its entry here: its names, the program that
starts it, its hook events (and relay's name for each), the variables that may name its env
file, where its settings file is, what `relay hook install` writes there (handlers and
timeouts), how an idle session is woken, and the version whose shipped package the formats
were checked against. The hook, the installer, the waiter, the launcher, the guide and
doctor read these entries. A new runtime is one more entry, its fixtures in
tests/fixtures/ (tests/fixtures/README.md), and its name in three places that cannot read
this table, each checked by a test: core/limits.py's KINDS (core imports nothing above it),
entry.py's HOOK_RUNTIMES (the hook's fast path imports nothing) and its own section of
the guide (agents/guide.py).

This module imports nothing from relay and nothing heavy: doctor and the hook read it on
their start-up path.
"""

from __future__ import annotations

from ..core.limits import HOOK_TIMEOUT_S
from ..core.record import field, record

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from ..core.limits import RuntimeName

# The Codex release whose shipped package relay's formats and launch rules were checked
# with (its hook schemas, its options, its app server): written here only.
CODEX_CHECKED = "0.171.0"

# relay's four events, in Claude Code's and Codex's names, in the order they fire.
EVENTS = ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd")
# The events relay only observes, to record what a session is doing (design.md §19), in
# relay's names (Claude Code's where it has one): a hook on them prints nothing and exits 0.
OBSERVED = (
    "PermissionRequest",  # a tool waits for a person's permission
    "Notification",  # the runtime tells a person something (a permission prompt, a question)
    "PostToolUse",  # a tool ran: a wait for a person's permission is over
    "StopFailure",  # the turn ended on an error the runtime reports
    "ErrorOccurred",  # GitHub Copilot CLI: a model call failed
)


@record(frozen=True)
class Settings:
    """Where the runtime's settings file is: ``$VAR/<user_file>`` when ``var`` is set, else
    ``~/<user_dir>/<user_file>``; ``--project``: ``<project_file>`` in the current
    directory."""

    user_dir: str  # under HOME when ``var`` is not set
    user_file: str
    project_file: str
    var: str | None = None  # the variable that moves the user directory
    var_holds_user_dir: bool = True  # False: $VAR stands for HOME (Gemini CLI)


@record(frozen=True)
class Runtime:
    name: RuntimeName  # `relay hook NAME`, the default peer kind, `relay guide --for NAME`
    display: str  # the runtime's name for people
    program: str  # the command that starts it (for `relay run`)
    events: dict[str, str]  # the runtime's event name -> relay's, in install order
    env_files: tuple[str, ...]  # variables that may name the env file, first set wins
    block: str  # the Stop decision that keeps the session going
    settings: Settings
    timeout_scale: int = 1  # hook timeouts in seconds (1) or milliseconds (1000)
    timeouts: dict[str, int] = field(default_factory=dict)  # relay event -> seconds
    handler_extra: dict[str, str] = field(default_factory=dict)  # keys every installed handler has
    # How an idle session is woken (design.md §12): "exit2" (the waiter exits 2, Claude
    # Code's asyncRewake), "queue" (the waiter runs `<program> queue`), "plugin" (the
    # waiter exits 2 and relay's plugin hands its note to the session as a prompt), or None.
    wake: str | None = None
    wake_flags: dict[str, bool] = field(default_factory=dict)  # what makes the handler background
    wake_by_default: bool = False  # installed without --wake
    wake_events: tuple[str, ...] = ("SessionStart", "Stop")  # relay's names
    # The waiter runs in the background only when each of these variables, if set, holds
    # one of the values given; otherwise the runtime would wait for it in the foreground.
    background_when: dict[str, tuple[str, ...]] = field(default_factory=dict)
    start_in_turn: bool = False  # SessionStart fires with the first prompt, in its turn
    launch_args: tuple[str, ...] = ()  # what `relay run` adds after the program's name
    launch_refuses: tuple[str, ...] = ()  # options `relay run` refuses for this program
    # `relay run` gives the interactive program a private server of its own instead of
    # ``launch_args`` (Codex's TUI: `codex app-server` on a unix socket, relay_cli/agents/codex_server.py)
    private_server: bool = False
    # What `relay hook install` writes: "settings" (hook handlers merged into a JSON
    # settings file) or "plugin" (a file of relay's own, opencode_plugin.py)
    install_kind: str = "settings"
    checked: str = ""  # the version whose shipped package the formats were checked with
    package: str = ""  # that package
    # What `relay hook install` tells the person to do, and what trips people up.
    hook_help: str = ""  # the help of `relay hook NAME` (first line: its summary)
    hook_examples: tuple[str, ...] = ()
    install_notes: tuple[str, ...] = ()
    project_note: str = ""  # with --project (goes second)
    wake_offer: str = ""  # when the waiter is opt-in and was not asked for
    # Where the runtime reads a hook's context (design.md §12): "specific" (Claude Code's
    # ``{"hookSpecificOutput": {"hookEventName", "additionalContext"}}``) or "top" (a
    # top-level ``{"additionalContext"}``: GitHub Copilot CLI ignores the other form).
    context: str = "specific"
    # The Stop block's words go in the Stop event's own context, and its reason only
    # points there (design.md §12): Claude Code hands a block's reason to the model twice
    # (as "Stop hook feedback" and as the hook's "blocking error"), its context once.
    stop_context: bool = False
    wake_note: str = ""  # why an idle session cannot be woken (a runtime with wake None)
    # What relay observes to record the session's activity (design.md §19): the runtime's
    # event -> relay's name (OBSERVED), what each installed handler adds (``async``: run in
    # the background; ``matcher``: the group's matcher), and, per activity, the event that
    # reports it ("" or absent: the runtime sends none, so relay cannot tell).
    # the keys that may name the runtime's session in an event, first present wins
    session_keys: tuple[str, ...] = ("session_id",)
    observes: dict[str, str] = field(default_factory=dict)
    observe_flags: dict[str, dict[str, object]] = field(default_factory=dict)
    observe_matchers: dict[str, str] = field(default_factory=dict)
    reports: dict[str, str] = field(default_factory=dict)

    def relay_event(self, runtime_event: str) -> str | None:
        return self.events.get(runtime_event) or self.observes.get(runtime_event)

    @property
    def hears_answers(self) -> bool:
        """relay hears when a wait for a person is over (a tool ran, a reply came), not
        only the next turn's start or end."""
        return "PostToolUse" in self.observes.values()

    def runtime_event(self, relay_event: str) -> str:
        return next(k for k, v in self.events.items() if v == relay_event)

    def timeout(self, relay_event: str) -> int:
        return self.timeouts.get(relay_event, HOOK_TIMEOUT_S) * self.timeout_scale

    def waits_in_foreground(self, environ: Mapping[str, str]) -> bool:
        """True when the runtime would wait for a background hook in the foreground
        (design.md §12: Claude Code's print mode and SDK), so a waiter must not wait."""
        for var, values in self.background_when.items():
            value = environ.get(var)
            if value is not None and value not in values:
                return True
        return False


_SAME = {e: e for e in EVENTS}

CLAUDE = Runtime(
    name="claude",
    display="Claude Code",
    program="claude",
    events=_SAME,
    env_files=("CLAUDE_ENV_FILE",),
    block="block",
    stop_context=True,
    settings=Settings(".claude", "settings.json", ".claude/settings.json", var="CLAUDE_CONFIG_DIR"),
    wake="exit2",
    wake_flags={"asyncRewake": True},
    wake_by_default=True,
    background_when={"CLAUDE_CODE_SESSION_ATTENDED": ("1",), "CLAUDE_CODE_ENTRYPOINT": ("cli",)},
    hook_help="""Claude Code command hook: reads the event JSON on stdin, answers in Claude Code's format.

    For SessionStart, UserPromptSubmit, Stop and SessionEnd; with --wake it is the
    asyncRewake waiter that exits 2 with relay's note (request ids, no peer text) when new
    work is queued (in print mode and the SDK it exits 0 at once). `relay hook install
    claude` sets it up. It never fails the agent: on anything unexpected it exits 0 and
    prints nothing.
    """,
    hook_examples=(
        "relay hook install claude --dry-run   # what would change",
        "relay hook install claude             # into Claude Code's settings",
    ),
    checked="2.1.332",
    package="@anthropic-ai/claude-agent-sdk 0.3.332",
    # (Interrupt, a turn stopped, came with 2.1.335: 2.1.332 does not know it)
    observes={e: e for e in ("PermissionRequest", "Notification", "PostToolUse", "StopFailure")},
    # in the background: none of them may hold the session up, nor decide a permission
    observe_flags={
        e: {"async": True}
        for e in ("PermissionRequest", "Notification", "PostToolUse", "StopFailure")
    },
    observe_matchers={
        "Notification": "permission_prompt|worker_permission_prompt|elicitation_dialog|"
        "elicitation_url_dialog"
    },
    reports={
        "working": "UserPromptSubmit",
        "permission": "PermissionRequest (its TUI), Notification `permission_prompt` "
        "(print mode and the SDK, when a host was asked)",
        "question": "Notification `elicitation_dialog`; PermissionRequest of AskUserQuestion",
        "answered": "PostToolUse",
        "idle": "Stop",
        "turn_failed": "StopFailure",
        "gone": "SessionEnd",
    },
    install_notes=(
        "Restart Claude Code, and give each session its peer name: `RELAY_PEER=NAME claude` "
        "(Claude Code's CLAUDE_ENV_FILE carries the session to its shell commands), or "
        "`relay run --as NAME --kind claude -- claude`.",
        "Check with `relay peers list`: wakeup says `hook` after the first prompt and "
        "`waiter` while the session is idle.",
        "Print mode (`claude -p`) and the Agent SDK would wait for the waiter, so there it "
        "exits at once: such a run hears of requests from its hooks, not by waking. Claude "
        "Code stops quick repeated wakes after 8.",
        "Offline, start Claude Code with CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_"
        "AUTOINSTALL=1, or its TUI tries the network.",
        "Claude Code's own SendMessage/ListAgents reach other Claude sessions of yours; relay "
        "reaches any runtime and keeps a record. Use one for a piece of work, never both.",
    ),
)

CODEX = Runtime(
    name="codex",
    display="Codex",
    program="codex",
    events=_SAME,
    env_files=("CODEX_ENV_FILE", "CLAUDE_ENV_FILE"),
    block="block",
    settings=Settings(".codex", "hooks.json", ".codex/hooks.json", var="CODEX_HOME"),
    timeouts={"SessionEnd": 3},  # Codex (CODEX_CHECKED) clamps a longer SessionEnd timeout to 3 s
    wake="queue",
    wake_flags={"async": True},
    wake_by_default=False,
    start_in_turn=True,
    # The shared `codex app-server` daemon runs every thread with the environment of
    # whoever started it; without it each Codex keeps its own peer's identity.
    launch_args=("--no-daemon",),
    launch_refuses=("--remote",),
    # ...except the interactive TUI: it gets an app server of its own, started with its
    # peer's environment, and `--remote` to it, so a queued note starts a turn at once.
    private_server=True,
    hook_help="""Codex command hook: reads the event JSON on stdin, answers in Codex's format.

    The same events and output as Claude Code's; the identity comes from `relay run` (or
    CODEX_ENV_FILE). With --wake (opt-in) it waits for new work and then queues relay's
    note into the session with `codex queue`. `relay hook install codex` sets it up.
    """,
    hook_examples=(
        "relay hook install codex          # into Codex's settings",
        "relay hook install codex --wake   # with the wake waiter",
    ),
    checked=CODEX_CHECKED,
    package=f"@openai/codex {CODEX_CHECKED}",
    observes={"PermissionRequest": "PermissionRequest", "PostToolUse": "PostToolUse"},
    observe_flags={"PostToolUse": {"async": True}},
    reports={
        "working": "UserPromptSubmit",
        "permission": "PermissionRequest (its TUI; `codex exec` asks nobody)",
        "answered": "PostToolUse",
        "idle": "Stop",
        "gone": "SessionEnd (not at the TUI's /quit: `relay run` leaves)",
    },
    install_notes=(
        'Codex\'s TUI asks you to review new hooks when it starts ("Hooks need review"): '
        "trust relay's hooks there, or they do not run. `codex exec` does not ask: it "
        "silently skips untrusted hooks (--dangerously-bypass-hook-trust runs them). Trust "
        "is per entry position and content: changing relay's entries asks again.",
        f"Start Codex as `relay run --as NAME --kind codex -- codex`: Codex {CODEX_CHECKED} gives "
        "hooks no env file, so the launcher carries the relay session. It starts the TUI "
        "with an app server of its own (`codex app-server` on a private unix socket, with "
        "the peer's environment; `--remote` to it), and `codex exec` and the other "
        "subcommands with --no-daemon: the shared `codex app-server` daemon would run every "
        "session as the peer that started it.",
        "Codex fires SessionStart only at the first prompt (a waiter starts when that turn "
        "ends), and its TUI's /quit runs no SessionEnd: `relay run` leaves for it.",
    ),
    project_note="Codex reads .codex/hooks.json only in a project it trusts.",
    wake_offer="Optional: `relay hook install codex --wake` adds a waiter that wakes an idle "
    "session with `codex queue`; relay's note then arrives as a user turn (it says "
    "it comes from relay, not the user).",
)

GEMINI = Runtime(
    name="gemini",
    display="Gemini CLI",
    program="gemini",
    events={
        "SessionStart": "SessionStart",
        "BeforeAgent": "UserPromptSubmit",
        "AfterAgent": "Stop",
        "SessionEnd": "SessionEnd",
    },
    env_files=(),
    block="deny",
    settings=Settings(
        ".gemini",
        "settings.json",
        ".gemini/settings.json",
        var="GEMINI_CLI_HOME",
        var_holds_user_dir=False,
    ),
    timeout_scale=1000,
    handler_extra={"name": "relay"},
    wake_note="Gemini CLI has no background hooks",
    hook_help="""Gemini CLI command hook: SessionStart, BeforeAgent, AfterAgent and SessionEnd.

    Answers in Gemini CLI's format; the identity comes from `relay run`. Gemini CLI has no
    background hooks, so --wake does nothing here. `relay hook install gemini` sets it up.
    """,
    hook_examples=("relay hook install gemini   # into Gemini CLI's settings",),
    checked="0.61.0",
    package="@google/gemini-cli 0.61.0",
    # Gemini CLI awaits this hook before it shows the dialog: relay only records
    observes={"Notification": "Notification"},
    reports={
        "working": "BeforeAgent",
        "permission": "Notification `ToolPermission` (interactive only)",
        "question": "Notification `ToolPermission` of its ask_user tool",
        "idle": "AfterAgent",
        "gone": "SessionEnd",
    },
    install_notes=(
        "Start Gemini CLI as `relay run --as NAME --kind gemini -- gemini`: it gives hooks no "
        "env file, so the launcher carries the relay session.",
        "Gemini CLI runs hooks only in folders you trust (its folder-trust prompt).",
        "Gemini CLI has no background hooks: relay cannot wake an idle Gemini session; it "
        "hears of requests at its next prompt or answer.",
        "`gemini hooks migrate --from-claude` replaces relay's Gemini hooks with copies of "
        "its Claude Code ones (10 ms timeouts, a waiter that blocks): after it, remove the "
        "copied `relay hook claude` entries and run `relay hook install gemini` again.",
    ),
)

OPENCODE = Runtime(
    name="opencode",
    display="opencode",
    program="opencode",
    # relay's plugin (opencode_plugin.py) sends Claude-shaped events named as relay's
    events=_SAME,
    env_files=(),
    block="block",
    settings=Settings(
        ".config", "opencode/plugins/relay.js", ".opencode/plugins/relay.js", var="XDG_CONFIG_HOME"
    ),
    wake="plugin",
    wake_by_default=True,
    wake_events=("Stop",),
    start_in_turn=True,
    install_kind="plugin",
    hook_help="""opencode hook: run by relay's opencode plugin; reads the event JSON on stdin.

    The plugin sends SessionStart and UserPromptSubmit at a prompt (chat.message), Stop
    when an answer's text completes, and runs the waiter (--wake) while the session is
    idle: it exits 2 with relay's note, which the plugin submits as a prompt. The
    identity comes from `relay run`. `relay hook install opencode` writes the plugin.
    """,
    hook_examples=(
        "relay hook install opencode --dry-run   # what would change",
        "relay hook install opencode             # writes relay's plugin",
    ),
    checked="1.18.33",
    package="opencode-ai 1.18.33 (opencode-linux-x64)",
    # relay's plugin turns these bus events into Claude-shaped ones (opencode_plugin.py)
    observes={e: e for e in ("Notification", "PostToolUse", "StopFailure")},
    reports={
        "working": "chat.message",
        "permission": "permission.asked (its TUI; `opencode run` answers by itself)",
        "question": "question.asked",
        "answered": "permission.replied, question.replied, question.rejected",
        "idle": "experimental.text.complete",
        "turn_failed": "session.error",
        "gone": "`relay run` leaving when opencode exits",
    },
    install_notes=(
        "Start opencode as `relay run --as NAME --kind opencode -- opencode`: it gives "
        "plugins no env file, so the launcher carries the relay session, and opencode "
        "has no session-end event: `relay run` leaves when it exits.",
        "Check with `relay peers list`: wakeup says `hook` after the first prompt and "
        "`waiter` while the session is idle. opencode starts a session at its first "
        "prompt: before that there is nothing to wake.",
        "`opencode serve`, `web` and `attach` run every session with the server's "
        "environment: one peer per server, started under `relay run`.",
        "Offline, put a .npmrc holding offline=true into opencode's config directory, or "
        "each start waits about a minute for an npm install.",
    ),
    project_note="opencode loads .opencode/plugins/ of the project it starts in.",
)

COPILOT = Runtime(
    name="copilot",
    display="GitHub Copilot CLI",
    program="copilot",
    # Copilot CLI reads Claude Code's hook file format too (PascalCase event names, nested
    # matcher groups) and then sends Claude-shaped payloads (hook_event_name, session_id).
    events=_SAME,
    env_files=(),
    block="block",
    settings=Settings(
        ".copilot", "hooks/relay.json", ".github/hooks/relay.json", var="COPILOT_HOME"
    ),
    start_in_turn=True,
    context="top",
    wake_note="Copilot CLI runs no background hooks and has no command that prompts a "
    "running session from outside (its extensions can, in experimental mode only)",
    hook_help="""GitHub Copilot CLI command hook: reads the event JSON on stdin, answers in its format.

    For SessionStart, UserPromptSubmit, Stop and SessionEnd, written in Claude Code's
    hook file format (Copilot CLI then sends Claude-shaped events); the context goes in a
    top-level additionalContext, the one Copilot CLI reads. The identity comes from `relay
    run`. Copilot CLI has no background hooks, so --wake does nothing here. `relay hook
    install copilot` sets it up.
    """,
    hook_examples=("relay hook install copilot   # into ~/.copilot/hooks/relay.json",),
    checked="1.0.102",
    package="@github/copilot 1.0.102 (@github/copilot-linux-x64)",
    # its `notification` hook fires only when a prompt is shown, in the background; its
    # permissionRequest runs before its rules decide, so it says nothing of a person.
    # Its Notification names the session `sessionId` (1.0.102), its other events session_id.
    session_keys=("session_id", "sessionId"),
    observes={"Notification": "Notification", "ErrorOccurred": "ErrorOccurred"},
    reports={
        "working": "UserPromptSubmit",
        "permission": "Notification `permission_prompt` (a prompt shown)",
        "question": "Notification `elicitation_dialog`",
        "idle": "Stop",
        "turn_failed": "ErrorOccurred of a model call",
        "gone": "SessionEnd",
    },
    install_notes=(
        "Start Copilot CLI as `relay run --as NAME --kind copilot -- copilot`: it gives "
        "hooks no env file, so the launcher carries the relay session.",
        "Copilot CLI fires SessionStart only at the first prompt, and relay cannot wake an "
        "idle Copilot CLI session: it hears of requests at its next prompt or stop.",
        "Copilot CLI loads a repository's .github/hooks/ only in a folder you trust; "
        "`disableAllHooks` in its settings turns every hook off.",
    ),
    project_note="Copilot CLI reads .github/hooks/relay.json only in a folder you trust.",
)

ALL = (CLAUDE, CODEX, GEMINI, OPENCODE, COPILOT)
BY_NAME: dict[str, Runtime] = {r.name: r for r in ALL}
NAMES = tuple(BY_NAME)


def get(name: str) -> Runtime | None:
    return BY_NAME.get(name)


def display(name: str) -> str | None:
    """The runtime's name for people, or None for a kind that is no runtime of relay's."""
    r = BY_NAME.get(name)
    return r.display if r else None


def for_program(path: str) -> Runtime | None:
    """The runtime a command starts, by the basename of its program."""
    import os

    base = os.path.basename(path)
    return next((r for r in ALL if r.program == base), None)


def either(items: Iterable[str]) -> str:
    """``a, b or c``."""
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]
