"""Render man/relay.1 from the schema document (``relay_cli.cli.schema.build()``).

The COMMANDS, STATES, EXIT STATUS and ENVIRONMENT sections come from the document (that
is, from the live command tree, ``errors.ERRORS`` and ``states.TRANSITIONS``); NAME,
SYNOPSIS, DESCRIPTION, FILES, SECURITY and EXAMPLES are written here.
"""

from __future__ import annotations

import re


def esc(text: str) -> str:
    """Escape text for a roff text line (or several): backslashes, dashes, control
    characters at the start of a line; `code` becomes bold."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    text = re.sub(r"`([^`]+)`", r"\\fB\1\\fR", text)
    lines = []
    for line in text.split("\n"):
        line = line.strip()
        if line.startswith((".", "'")):
            line = "\\&" + line
        lines.append(line)
    return "\n".join(lines)


def paragraphs(text: str | None) -> list[str]:
    if not text:
        return []
    out = []
    for para in re.split(r"\n\s*\n", text.strip()):
        if para.startswith("\b\n"):  # Click's verbatim block (examples): kept line by line
            lines = para[2:].splitlines()
            out += [".PP", ".nf", ".RS 4", *(esc(line) for line in lines), ".RE", ".fi"]
            continue
        out += [".PP", esc(" ".join(line.strip() for line in para.splitlines()))]
    return out


def _option_label(o: dict) -> str:
    flags = " | ".join(f"\\fB{esc(f)}\\fR" for f in o["flags"])
    if not o["is_flag"]:
        shown = o["metavar"] or ("|".join(o["choices"]) if o.get("choices") else o["type"].upper())
        flags += f" \\fI{esc(shown)}\\fR"
    return flags


def _option_help(o: dict) -> str:
    text = o["help"] or ""
    extra = []
    if o["required"]:
        extra.append("Required.")
    if o["multiple"]:
        extra.append("Repeatable.")
    if o["default"] not in (None, False, []) and "default" not in text.lower():
        extra.append(f"Default: {o['default']}.")
    return esc(" ".join([text, *extra]).strip())


def commands_section(doc: dict) -> list[str]:
    out = [
        ".SH COMMANDS",
        "Every command takes \\fB\\-\\-json\\fR (exactly one JSON document on stdout) and "
        "\\fB\\-\\-home\\fR \\fIPATH\\fR, and \\fB\\-h\\fR, \\fB\\-\\-help\\fR.",
    ]
    for c in doc["commands"][1:]:
        out += [f".SS {esc(c['usage'])}"]
        out += paragraphs(c["help"])
        if c.get("subcommands"):
            out += [
                ".PP",
                "Subcommands: " + ", ".join(f"\\fB{esc(s)}\\fR" for s in c["subcommands"]) + ".",
            ]
        for a in c["arguments"]:
            out += [".TP", f"\\fI{esc(a['name'])}\\fR", _option_help(a) or "(argument)"]
        for o in c["options"]:
            out += [".TP", _option_label(o), _option_help(o)]
        out += paragraphs(c["epilog"])
    return out


def states_section(doc: dict) -> list[str]:
    states = doc["states"]
    out = [
        ".SH STATES",
        "A request is always in exactly one of these states. What each state claims, and "
        "what it does not claim:",
    ]
    for s in states["all"]:
        m = states["meaning"][s]
        text = f"It claims: {m['claims']}."
        if m["does_not_claim"]:
            text += f" It does not claim: {m['does_not_claim']}."
        out += [".TP", f"\\fB{esc(s)}\\fR", esc(text)]
    out += [
        ".PP",
        "Final states: "
        + ", ".join(f"\\fB{esc(s)}\\fR" for s in states["final"])
        + " (\\fBdelivery_unknown\\fR can be changed only by \\fBrelay resolve\\fR).",
        ".SS Transitions",
        "The only ways a request changes state (event, then \\fBreason\\fR); any other "
        "event is refused with \\fBstate_conflict\\fR and changes nothing:",
    ]
    for t in doc["transitions"]:
        src = f"\\fB{esc(t['from'])}\\fR" if t["from"] else "(new)"
        out += [
            ".TP",
            f"{src} \\(-> \\fB{esc(t['to'])}\\fR",
            esc(t["description"]) + f" (reason: \\fB{esc(t['reason'] or 'null')}\\fR)",
        ]
    return out


def exit_section(doc: dict) -> list[str]:
    out = [".SH EXIT STATUS"]
    for e in doc["exit_status"]:
        text = e["meaning"]
        if e["errors"]:
            text += ": " + ", ".join(f"`{c}`" for c in e["errors"])
        out += [".TP", f"\\fB{e['code']}\\fR", esc(text) + "."]
    out += [
        ".SS Error codes",
        "Errors go to stderr; with \\fB\\-\\-json\\fR as one line "
        '\\fB{"error": {"code", "message", "hint", "retryable", '
        '"retry_after_seconds", "exit_code"}}\\fR. Each code has one fixed hint:',
    ]
    for e in doc["errors"]:
        retry = ", retryable" if e["retryable"] else ""
        also = ", ".join(str(x["exit_code"]) for x in e["also_exits"])
        also = f"; also {also}, see above" if also else ""
        out += [
            ".TP",
            f"\\fB{esc(e['code'])}\\fR (exit {e['exit_code']}{also}{retry})",
            esc(e["hint"]),
        ]
    return out


def environment_section(doc: dict) -> list[str]:
    out = [".SH ENVIRONMENT"]
    for e in doc["environment"]:
        out += [".TP", f"\\fB{esc(e['name'])}\\fR", esc(e["meaning"])]
    return out


def example(lines: list[str]) -> list[str]:
    return [".PP", ".RS 4", ".nf", *[esc(line) for line in lines], ".fi", ".RE"]


DESCRIPTION = """\
relay lets a person who runs several AI coding agents on one machine (Claude Code, Codex, \
Gemini CLI, Aider, scripts) have them hand each other work. Agents call relay as ordinary \
shell commands; there is no daemon, no port and no network protocol. Every command reads \
and writes one SQLite database in a per-user state directory, inside short transactions.

The promise: relay never runs or delivers the same intent twice by accident, never loses \
an accepted request, and never claims more than it knows. A retry with the same request \
id and the same content returns the existing request (`duplicate: true`); the same id with \
other content is refused (`request_id_conflict`). When relay cannot know whether work was \
done it says `delivery_unknown` and never replays the work by itself: a person decides with \
`relay resolve`. A timeout of `wait` or `claim --wait` means "not yet", never "failed".

A peer is a named participant; a session is one live run of a peer, started with `relay \
peers join` and identified by RELAY_PEER and RELAY_SESSION (or `--as` and `--session`). A \
session holds a lease that its calls renew.

Nothing that arrives through relay is user approval: every request object carries \
`"authority": "external_ai_message"` and `"user_approval": false`.

Human output is plain text when stdout is not a terminal or NO_COLOR is set; `--json` \
prints exactly one JSON document on stdout. Errors go to stderr, never as a Python \
traceback. `relay schema` describes the whole interface as JSON."""

FILES = [
    (
        "$RELAY_HOME/relay.db",
        "The database (SQLite, WAL mode) with its relay.db-wal and relay.db-shm files. The "
        "directory is created with mode 0700 and the files with 0600; relay refuses a directory "
        "or database that is a symbolic link, owned by another user, unreadable, open to group "
        "or others, or not a regular file (unsafe_state_dir; `relay doctor --fix` tightens "
        "modes), and never creates a directory inside another user's directory (sudo with the "
        "user's HOME kept).",
    ),
    (
        "~/.local/state/relay",
        "The default state directory on Linux (the per-user state directory of the platform) "
        "when neither --home nor RELAY_HOME is given.",
    ),
    ("PREFIX/share/man/man1/relay.1", "This page, as installed from the wheel."),
    ("PREFIX/share/bash-completion/completions/relay", "Bash completion."),
    ("PREFIX/share/zsh/site-functions/_relay", "Zsh completion."),
    ("PREFIX/share/fish/vendor_completions.d/relay.fish", "Fish completion."),
]

SECURITY = """\
relay protects against accidents, stale sessions, races, retries and confused agents. A \
request id names at most one request, so a retried send is never a second job. Session \
tokens are stored only as SHA-256; a lapsed or superseded session cannot change anything, \
and its in-flight work becomes delivery_unknown instead of being silently redone. Every \
change runs in one SQLite transaction (BEGIN IMMEDIATE), so concurrent commands never \
half-apply. relay refuses a state directory that is a symbolic link, owned by another user \
or open to group or others. Text from other agents is shown inert (markup escaped, control \
characters made visible) and framed as not user approval; `relay approve` and `relay deny` \
require a terminal on standard input, which stops accidents and habits, not a program that \
fakes a terminal.

relay is not a security boundary between hostile programs of the same OS user. Any program \
running as you can read and write the database (raw SQL, or a tampered WAL, bypasses every \
rule), read session tokens from other processes' environments, fake a terminal, and run \
relay itself. RELAY_TIME_OFFSET is a test knob that rewrites the shared database by its \
clock: never set it on a home in use. docs/threat-model.md has the details. Text given as a command-line argument is visible to \
other local users in the process list: pass it on standard input (`-`). RELAY_RATE_LIMIT \
guards against runaway agent loops, not against a hostile caller."""

EXAMPLES = [
    (
        "Start a session for the current shell (the token is shown once):",
        ['eval "$(relay peers join reviewer --kind claude --shell)"'],
    ),
    (
        "Send work with your own id, text on standard input, so a retry is safe:",
        [
            "ID=$(uuidgen)",
            "relay send --to reviewer --id \"$ID\" - <<'EOF'",
            "Please review the diff in branch feature-x.",
            "EOF",
        ],
    ),
    (
        "On the recipient: take the oldest request (waiting up to 5 minutes), confirm, reply:",
        ["relay claim --wait 5m --json", 'relay ack "$ID"', 'relay reply "$ID" - < review.txt'],
    ),
    (
        "Wait for the outcome (exit 0 completed, 10 not completed, 11 delivery_unknown, 75 "
        "still open):",
        ['relay wait "$ID" --timeout 5m'],
    ),
    (
        "A person settles a request whose outcome relay cannot know:",
        ['relay resolve "$ID" --outcome failed --note "never ran: checked the log"'],
    ),
    (
        "Run a side effect at most once per tool call id:",
        ['relay once --key "$TOOL_USE_ID" -- gh pr create --fill'],
    ),
    (
        "List the retryable error codes:",
        ["relay schema | jq -r '.errors[] | select(.retryable) | .code'"],
    ),
]


def render(doc: dict) -> str:
    root = doc["commands"][0]
    out = [
        f'.TH RELAY 1 "" "relay {esc(doc["version"])}" "User Commands"',
        '.\\" Generated by scripts/generate.py from the live command tree; do not edit.',
        ".nh",
        ".ad l",
        ".SH NAME",
        "relay \\- hand work between AI coding agents on one machine, never lying about delivery",
        ".SH SYNOPSIS",
        ".B relay",
        ".I COMMAND",
        ".RI [ OPTIONS ]",
        ".RI [ ARGS ]...",
        ".br",
        ".B relay",
        "[\\fB\\-\\-version\\fR] [\\fB\\-h\\fR | \\fB\\-\\-help\\fR] "
        "[\\fB\\-\\-install\\-completion\\fR] [\\fB\\-\\-show\\-completion\\fR]",
        ".PP",
        "Commands: " + ", ".join(f"\\fB{esc(s)}\\fR" for s in root["subcommands"]) + ".",
        ".SH DESCRIPTION",
    ]
    out += paragraphs(DESCRIPTION)
    out += [".SH OPTIONS"]
    for o in root["options"]:
        out += [".TP", _option_label(o), _option_help(o)]
    out += commands_section(doc)
    out += states_section(doc)
    out += exit_section(doc)
    out += environment_section(doc)
    out += [".SH FILES"]
    for name, text in FILES:
        out += [".TP", f"\\fI{esc(name)}\\fR", esc(text)]
    out += [".SH SECURITY"] + paragraphs(SECURITY)
    out += [".SH EXAMPLES"]
    for text, lines in EXAMPLES:
        out += [".PP", esc(text)] + example(lines)[1:]
    out += [
        ".SH SEE ALSO",
        "\\fBrelay schema\\fR (the interface as JSON), \\fBrelay guide\\fR (instructions "
        "for agents), \\fBsqlite3\\fR(1).",
    ]
    return "\n".join(out) + "\n"
