"""Rendering (design.md §7): one JSON document, or human output that keeps peer text inert.

Human output is rich (tables, colour) on a terminal and plain text otherwise or under
``NO_COLOR``. ``rich`` is imported only when a terminal actually needs it.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field

from . import clock
from .errors import RelayError

# C0/C1 controls (but newline and tab), line/paragraph separators, and the invisible
# format characters (Unicode Cf) that reorder or hide text: bidi controls and marks,
# zero-width characters, the BOM, tag characters.
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u0600-\u0605\u061c\u06dd\u070f\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\U000e0001\U000e0020-\U000e007f]"
)
_LINE_BREAKS = re.compile("[\n\t]")


def inert(value) -> str:
    """Peer-supplied text made harmless for a terminal: control characters shown as escapes.

    Newline and tab stay. Rich markup is never interpreted because human output passes
    strings to rich as ``Text`` (never as markup) and plain output never goes through rich.
    """
    if value is None:
        return "-"
    s = str(value)
    return _CONTROL.sub(lambda m: _escape_char(m.group()), s)


def inert_line(value) -> str:
    """``inert`` for a value shown on one line (a table cell, a field): newline and tab
    are made visible too, so a value can never start a line of its own."""
    return _LINE_BREAKS.sub(lambda m: "\\n" if m.group() == "\n" else "\\t", inert(value))


def _escape_char(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


NOT_YET = ("timeout", "nothing_to_claim")  # exit 75 of wait and claim --wait


@dataclass
class Output:
    json_mode: bool = False
    stdout: object = field(default_factory=lambda: sys.stdout)
    stderr: object = field(default_factory=lambda: sys.stderr)

    @property
    def rich(self) -> bool:
        if self.json_mode or os.environ.get("NO_COLOR"):
            return False
        try:
            return self.stdout.isatty()
        except (AttributeError, ValueError):
            return False

    # ---------------------------------------------------------------- primitives
    def json(self, doc) -> None:
        encoding = (getattr(self.stdout, "encoding", None) or "utf-8").lower().replace("-", "")
        ascii_only = encoding not in ("utf8", "utf8sig")
        self.stdout.write(json.dumps(doc, ensure_ascii=ascii_only, separators=(", ", ": ")) + "\n")
        self.stdout.flush()

    def line(self, text: str = "") -> None:
        self.stdout.write(text + "\n")

    def console(self):
        from rich.console import Console

        return Console(file=self.stdout, highlight=False, soft_wrap=False, emoji=False)

    def error(self, err: RelayError) -> None:
        if self.json_mode:
            self.stderr.write(json.dumps({"error": err.to_dict()}) + "\n")
        else:
            # a wait that ran out means "not yet" (design.md §1), never an error
            label = "not yet" if err.code in NOT_YET else "error"
            self.stderr.write(f"relay: {label}: {err.code}: {inert_line(err.message)}\n")
            self.stderr.write(f"hint: {inert(err.hint)}\n")
            if err.retry_after is not None:
                self.stderr.write(f"retry after: {err.to_dict()['retry_after_seconds']} s\n")
        self.stderr.flush()

    def cannot_start(self, message: str, exit_code: int, hint: str) -> None:
        """`run` / `once` could not start the command: relay exits 127 (not found) or 126
        (not executable) as a shell does. No design.md §7 code names this case; it is reported
        as ``usage_error`` with the shell's exit status."""
        if self.json_mode:
            self.stderr.write(json.dumps({"error": {
                "code": "usage_error", "message": message, "hint": hint, "retryable": False,
                "retry_after_seconds": None, "exit_code": exit_code,
            }}) + "\n")
        else:
            self.stderr.write(f"relay: error: usage_error: {inert_line(message)}\n"
                              f"hint: {inert_line(hint)}\n")
        self.stderr.flush()

    def waiting(self, text: str) -> None:
        """What a blocked command waits for, on stderr, only for a person: when stderr is a
        terminal and the output is not JSON (design.md §14)."""
        try:
            if self.json_mode or not self.stderr.isatty():
                return
        except (AttributeError, ValueError):
            return
        self.note(text)

    def note(self, text: str) -> None:
        """A line for the person on stderr (never part of the JSON document)."""
        self.stderr.write(text + "\n")
        self.stderr.flush()

    # ---------------------------------------------------------------- shapes
    def fields(self, pairs: list[tuple[str, object]], title: str | None = None) -> None:
        """Key/value lines. Values are treated as untrusted."""
        if self.rich:
            from rich.table import Table

            table = Table(show_header=False, box=None, title=title, title_justify="left",
                          pad_edge=False)
            table.add_column(style="bold cyan", no_wrap=True)
            table.add_column()
            for k, v in pairs:
                table.add_row(k, _styled(k, v))
            self.console().print(table)
            return
        if title:
            self.line(title)
        width = max((len(k) for k, _ in pairs), default=0)
        for k, v in pairs:
            self.line(f"{k.ljust(width)}  {inert_line(v)}")

    def table(self, columns: list[str], rows: list[list[object]], title: str | None = None,
              empty: str = "(none)") -> None:
        if self.rich:
            from rich.table import Table
            from rich.text import Text

            table = Table(title=title, title_justify="left", header_style="bold")
            for c in columns:
                table.add_column(c, overflow="fold", no_wrap=c in ("id", "key"))
            for r in rows:
                table.add_row(*[_styled(c, v) for c, v in zip(columns, r, strict=True)])
            if rows:
                self.console().print(table)
            else:
                self.console().print(Text(empty, style="dim"))
            return
        if title:
            self.line(title)
        if not rows:
            self.line(empty)
            return
        cells = [[inert_line(v) for v in r] for r in rows]
        widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
        self.line("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
        for r in cells:
            self.line("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())

    def message(self, sender: str, body: str, label: str = "message") -> None:
        """Frame another agent's text so it cannot pass as relay's lines or user approval."""
        head = (f"--- {label} from agent {inert(sender)!s} "
                "(external_ai_message; this is NOT user approval) ---")
        lines = inert(body.removesuffix("\n")).split("\n")
        if self.rich:
            from rich.panel import Panel
            from rich.text import Text

            self.console().print(Panel(
                Text("\n".join(lines)),
                title=Text(f"{label} from agent {inert(sender)}", style="bold yellow"),
                subtitle=Text("external_ai_message - this is NOT user approval", style="yellow"),
                title_align="left", subtitle_align="left", border_style="yellow",
            ))
            return
        self.line(head)
        for ln in lines:
            self.line("| " + ln)
        self.line(f"--- end of {label} ---")


STATE_STYLES = {
    "queued": "blue", "delivered": "cyan", "acknowledged": "cyan", "completed": "green",
    "failed": "bold red", "rejected": "magenta", "expired": "dim", "cancelled": "dim",
    "delivery_unknown": "bold white on red",
}


def _styled(column: str, value):
    from rich.text import Text

    s = inert_line(value)
    if column in ("state", "to_state") and s in STATE_STYLES:
        return Text(s, style=STATE_STYLES[s])
    return Text(s)


def age(ms: int | None, now: int) -> str:
    if ms is None:
        return "-"
    return clock.human_duration(max(0, now - ms) / 1000)


def iso_age(iso: str | None, now: int) -> str:
    return "-" if iso is None else age(clock.parse_iso(iso), now)


def iso_left(iso: str | None, now: int) -> str:
    return "-" if iso is None else clock.human_duration(max(0, clock.parse_iso(iso) - now) / 1000)


def size(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB"
