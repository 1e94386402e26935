#!/usr/bin/env python3
"""Regenerate every generated file of relay from the live command tree.

    python scripts/generate.py           rewrite every generated file
    python scripts/generate.py --check   change nothing; exit 1 and name the files that differ

Generated (never edit them by hand):
  completions/relay.bash, completions/bash/relay   bash (Typer's own script; the second copy
                                                   carries the name bash-completion looks up)
  completions/_relay                               zsh (Typer's script, made autoloadable)
  completions/relay.fish                           fish (Typer's script)
  man/relay.1                                      the man page
  docs/reference.md                                every command's --help, errors, states
  docs/design.md, between its GENERATED markers    the tables of states, transitions, errors
  docs/requests.md, between its GENERATED markers  the states table (the rest is by hand)
  README.md, between its GENERATED markers         the states table (the rest is by hand)

Completions come from the real command (`_RELAY_COMPLETE=source_bash relay`, run as
`python -m relay_cli`); the man page and the reference come from ``relay_cli.cli.schema``
(the same document `relay schema` prints) and from each command's real --help output.
docs/design.md is written by hand except its tables, which come from the same document:
each sits between ``<!-- BEGIN GENERATED name ... -->`` and ``<!-- END GENERATED name -->``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # generate from this tree, not from an installed relay
sys.path.insert(0, str(ROOT / "scripts"))

import manpage  # noqa: E402  (scripts/manpage.py, after the path is set)

HELP_COLUMNS = "80"


# ------------------------------------------------------------------ completions
def _relay_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "_RELAY"))}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def completion_script(shell: str) -> str:
    """Typer's completion script for ``shell``, as the real `relay` prints it."""
    p = subprocess.run(
        [sys.executable, "-m", "relay_cli"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=_relay_env(_RELAY_COMPLETE=f"source_{shell}"),
        check=False,
    )
    if p.returncode != 0 or not p.stdout.strip():
        raise SystemExit(f"generate: `_RELAY_COMPLETE=source_{shell} relay` failed: {p.stderr}")
    return p.stdout.strip("\n") + "\n"


ZSH_TAIL = "compdef _relay_completion relay\n"
ZSH_AUTOLOAD_TAIL = """\
# Autoloaded from $fpath (as share/zsh/site-functions/_relay): complete now.
# Sourced from ~/.zshrc: register the function.
if [[ "${funcstack[1]}" == "_relay" ]]; then
  _relay_completion "$@"
else
  compdef _relay_completion relay
fi
"""


def zsh_script() -> str:
    """Typer's zsh script registers itself with compdef, which does nothing on the first
    TAB when zsh autoloads the file from $fpath; make it work both ways."""
    text = completion_script("zsh")
    if not text.endswith(ZSH_TAIL):
        raise SystemExit("generate: Typer's zsh script changed shape; update ZSH_TAIL")
    return text[: -len(ZSH_TAIL)] + ZSH_AUTOLOAD_TAIL


# ------------------------------------------------------------------ --help texts
_ROOT_COMMAND = None


def help_text(path: list[str]) -> str:
    """The exact `relay PATH --help` output at 80 columns (in-process, deterministic).

    Runs the same Click command `relay` runs (built once from the Typer app).
    """
    global _ROOT_COMMAND
    import relay_cli.cli.commands  # noqa: F401  (registers every command)
    from relay_cli.cli import schema

    if _ROOT_COMMAND is None:
        _ROOT_COMMAND = schema.root_command()
    saved = {k: os.environ.get(k) for k in ("COLUMNS", "NO_COLOR", "TERM")}
    os.environ.update(COLUMNS=HELP_COLUMNS, NO_COLOR="1", TERM="dumb")
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            code = _ROOT_COMMAND.main(
                args=[*path, "--help"], prog_name="relay", standalone_mode=False
            )
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if code not in (0, None):
        raise SystemExit(f"generate: relay {' '.join(path)} --help exited {code}")
    return buf.getvalue().rstrip() + "\n"


def _md(text: str) -> str:
    """Text for a Markdown table cell or list item: `|` escaped, `<` escaped outside code."""
    parts = text.replace("|", "\\|").split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;") for i, p in enumerate(parts))


def reference(doc: dict) -> str:
    out = [
        "# relay command reference",
        "",
        "<!-- Generated by `python scripts/generate.py` from the live command tree; do not "
        "edit. `python scripts/generate.py --check` (and tests/project/test_generated.py) fail when "
        "this page is out of date. -->",
        "",
        "Every command's `--help`, then the exit statuses, error codes, states and "
        "environment variables. The same facts, for machines: `relay schema`.",
        "",
        "## Commands",
        "",
    ]
    for c in doc["commands"]:
        anchor = c["path"].replace(" ", "-")
        out.append(f"- [`{c['path']}`](#{anchor}): {_md(c['short_help'] or '')}")
    for c in doc["commands"]:
        path = c["path"].split()[1:]
        out += ["", f"## {c['path']}", "", "```text", help_text(path).rstrip(), "```"]

    out += ["", "## Exit status", "", "| status | meaning | error codes |", "|---|---|---|"]
    for e in doc["exit_status"]:
        codes = ", ".join(f"`{c}`" for c in e["errors"]) or "—"
        out.append(f"| {e['code']} | {_md(e['meaning'])} | {codes} |")

    out += [
        "",
        "## Error codes",
        "",
        'Errors go to stderr; with `--json` as one line `{"error": {"code", '
        '"message", "hint", "retryable", "retry_after_seconds", "exit_code"}}`.',
        "",
        *error_table(doc),
    ]

    out += ["", "## States", "", *request_state_table(doc)]
    out += [
        "",
        "Final states: " + ", ".join(f"`{s}`" for s in doc["states"]["final"]) + ".",
        "",
        "| from | event | to | reason |",
        "|---|---|---|---|",
    ]
    for t in doc["transitions"]:
        out.append(
            f"| {_code_or(t['from'])} | {_md(t['description'])} | `{t['to']}` "
            f"| {_code_or(t['reason'], '`null`')} |"
        )

    out += [
        "",
        "## Request object",
        "",
        "Every key always present (`null` where unknown): "
        + ", ".join(f"`{k}`" for k in doc["request_object"]["always"])
        + "; plus "
        + ", ".join(f"`{k}`" for k in doc["request_object"]["where_listed"])
        + " where the command says so. Timestamps: "
        + doc["request_object"]["timestamps"]
        + ".",
    ]

    out += ["", "## Environment", "", "| variable | meaning |", "|---|---|"]
    for e in doc["environment"]:
        out.append(f"| `{e['name']}` | {_md(e['meaning'])} |")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ tables
def _code_or(value: str | None, none: str = "—") -> str:
    return f"`{value}`" if value is not None else none


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def _exits(error: dict) -> str:
    """An error's exit status, and the others it is also reported with."""
    also = [str(x["exit_code"]) for x in error["also_exits"]]
    return str(error["exit_code"]) + (f" (also {', '.join(also)}: see Exit status)" if also else "")


def error_table(doc: dict) -> list[str]:
    return _table(
        ["code", "exit", "retryable", "hint"],
        [
            [f"`{e['code']}`", _exits(e), "yes" if e["retryable"] else "no", _md(e["hint"])]
            for e in doc["errors"]
        ],
    )


def request_state_table(doc: dict) -> list[str]:
    meaning = doc["states"]["meaning"]
    return _table(
        ["state", "it claims", "it does not claim"],
        [
            [f"`{s}`", _md(meaning[s]["claims"]), _md(meaning[s]["does_not_claim"] or "—")]
            for s in doc["states"]["all"]
        ],
    )


def request_transition_table(doc: dict) -> list[str]:
    return _table(
        ["from", "event", "to", "reason", "what happens"],
        [
            [
                _code_or(t["from"]),
                f"`{t['event']}`",
                f"`{t['to']}`",
                _code_or(t["reason"], "`null`"),
                _md(t["description"]),
            ]
            for t in doc["transitions"]
        ],
    )


def ledger_state_table(doc: dict) -> list[str]:
    states = doc["ledger"]["states"]
    rows = []
    for s in states["all"]:
        m = states["meaning"][s]
        view = states["views"].get(s)
        stored = (
            f"a view of `{view['stored']}`: {_md(view['when'])}"
            if view
            else "stored" + (", final" if s in states["final"] else "")
        )
        rows.append(
            [f"`{s}`", stored, _md(m["claims"]), _md(m["does_not_claim"] or "—"), _md(m["on_call"])]
        )
    return _table(
        ["state", "kept as", "it claims", "it does not claim", "a call with the key"], rows
    )


def ledger_transition_table(doc: dict) -> list[str]:
    """One row per event, target, actor and condition; several from-states share it."""
    grouped: dict[tuple, list] = {}
    for t in doc["ledger"]["transitions"]:
        grouped.setdefault((t["event"], t["to"], t["who"], t["when"]), []).append(t["from"])
    return _table(
        ["from", "event", "to", "who", "when"],
        [
            [
                ", ".join(_code_or(f, "— (no entry)") for f in froms),
                f"`{event}`",
                _code_or(to, "— (withdrawn: the key is free)"),
                _md(who),
                _md(when),
            ]
            for (event, to, who, when), froms in grouped.items()
        ],
    )


DESIGN_TABLES = {
    "request-states": request_state_table,
    "request-transitions": request_transition_table,
    "errors": error_table,
    "ledger-states": ledger_state_table,
    "ledger-transitions": ledger_transition_table,
}


def fill(doc: dict, current: str, tables: dict, where: str) -> str:
    """``current`` (the text of the hand-written file ``where``) with each table of
    ``tables`` between its markers (``<!-- BEGIN GENERATED name ... -->`` ...
    ``<!-- END GENERATED name -->``) written afresh from ``doc``."""
    out = current
    for name, render in tables.items():
        begin = f"<!-- BEGIN GENERATED {name}"
        end = f"<!-- END GENERATED {name} -->"
        start, stop = out.find(begin), out.find(end)
        if start < 0 or stop < start or out.count(begin) != 1:
            raise SystemExit(
                f"generate: {where} needs exactly one {begin} ... --> and one {end} after it"
            )
        head_end = out.index("-->", start) + len("-->")
        out = out[:head_end] + "\n" + "\n".join(render(doc)) + "\n" + out[stop:]
    return out


def design(doc: dict, current: str) -> str:
    """docs/design.md with each table between its markers written afresh from ``doc``."""
    return fill(doc, current, DESIGN_TABLES, "docs/design.md")


# The hand-written page on requests shows the states table too.
REQUESTS_TABLES = {"request-states": request_state_table}


# ------------------------------------------------------------------ all files
def outputs() -> dict[str, str]:
    import relay_cli.cli.commands  # noqa: F401  (registers every command)
    from relay_cli.cli import schema

    doc = schema.build()
    bash = completion_script("bash")
    return {
        "completions/relay.bash": bash,
        "completions/bash/relay": bash,
        "completions/_relay": zsh_script(),
        "completions/relay.fish": completion_script("fish"),
        "man/relay.1": manpage.render(doc),
        "docs/reference.md": reference(doc),
        "docs/design.md": design(doc, (ROOT / "docs" / "design.md").read_text(encoding="utf-8")),
        "docs/requests.md": fill(
            doc,
            (ROOT / "docs" / "requests.md").read_text(encoding="utf-8"),
            REQUESTS_TABLES,
            "docs/requests.md",
        ),
        "README.md": fill(
            doc, (ROOT / "README.md").read_text(encoding="utf-8"), REQUESTS_TABLES, "README.md"
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 and name the files that differ"
    )
    args = parser.parse_args(argv)
    stale = []
    for rel, text in outputs().items():
        path = ROOT / rel
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        stale.append(rel)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if args.check:
        for rel in stale:
            print(f"out of date: {rel} (run: python scripts/generate.py)", file=sys.stderr)
        return 1 if stale else 0
    for rel in stale:
        print(f"wrote {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
