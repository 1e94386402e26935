"""Rendering (design.md §7): one JSON document, or human output that keeps peer text inert.

Human output is rich (tables, colour) on a terminal and plain text otherwise or under
``NO_COLOR``. ``rich`` is imported only when a terminal actually needs it.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Mapping

from . import clock
from .command import NO_SCOPE, Choices, Command, Said, Scope, said
from .context import is_tty
from .errors import RelayError
from .record import field, record

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Sequence, TextIO

if TYPE_CHECKING:
    from typing import Literal

    from rich.console import Console
    from rich.text import Text

    from .context import Context

# C0/C1 controls (but newline and tab), line/paragraph separators, and the invisible
# format characters (Unicode Cf) that reorder or hide text: bidi controls and marks,
# zero-width characters, the BOM, tag characters.
# (patterns compiled at first use, which re caches: `relay --help` never pays for them)
_CONTROL = (
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u0600-\u0605\u061c\u06dd\u070f\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\U000e0001\U000e0020-\U000e007f]"
)
_LINE_BREAKS = "[\n\t]"


def inert(value: object) -> str:
    """Peer-supplied text made harmless for a terminal: control characters shown as escapes.

    Newline and tab stay. Rich markup is never interpreted because human output passes
    strings to rich as ``Text`` (never as markup) and plain output never goes through rich.
    """
    if value is None:
        return "-"
    s = str(value)
    return re.sub(_CONTROL, lambda m: _escape_char(m.group()), s)


def inert_line(value: object) -> str:
    """``inert`` for a value shown on one line (a table cell, a field): newline and tab
    are made visible too, so a value can never start a line of its own."""
    return re.sub(_LINE_BREAKS, lambda m: "\\n" if m.group() == "\n" else "\\t", inert(value))


if TYPE_CHECKING:
    # A JSON object as relay prints one (``json_text``): the public shape of a request, a
    # peer, a ledger entry, ... (design.md §6), built as a dict.
    JsonObject = dict[str, Any]


def json_text(doc: object, encoding: str | None = "utf-8") -> str:
    """One JSON document that is inert on a terminal too (design.md §7).

    Non-ASCII text stays readable on a UTF-8 stream, but every C0 and C1 control
    character, DEL, the line and paragraph separators and the invisible format characters
    (bidi controls, zero-width characters, the BOM, tag characters) are written as
    ``\\uXXXX`` escapes (a surrogate pair above U+FFFF): a JSON reader gets the same
    string, a terminal gets no byte it would act on. Such characters can only occur
    inside strings, where the escape is valid JSON.
    """
    import json  # imported here: `relay --help` and `relay id` need no JSON (start-up)

    enc = (encoding or "utf-8").lower().replace("-", "")
    ascii_only = enc not in ("utf8", "utf8sig")
    text = json.dumps(doc, ensure_ascii=ascii_only, separators=(", ", ": "))
    return text if ascii_only else re.sub(_CONTROL, _json_escape, text)


def _json_escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _escape_char(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


NOT_YET = ("timeout", "nothing_to_claim")  # exit 75 of wait and claim --wait


@record(frozen=True)
class Col:
    """One column of a human table (design.md §14).

    ``min``: the narrowest the column shrinks to on a terminal that is too narrow (its
    cells then end with an ellipsis). ``fixed``: never shrinks (ids, states, times, whose
    every character matters). ``first``: shrinks before the others (a command line, a
    detail), so what a person types back (a name, a key) keeps its characters longest.
    ``keep_end``: a cut cell keeps its end (``…/project/dir``), for paths.
    ``middle``: a cut cell keeps its start and its end, whole words where they fit
    (``claude…frontend``), for names that differ only at the end (``…-frontend``,
    ``…-backend``).
    ``drop``: when even the narrowest columns do not fit the line, the columns with a
    ``drop`` are left out, 1 first, and the table says so under it; 0: never left out.
    ``styles``: value -> rich style, used when colour is on.
    """

    name: str
    min: int = 8
    fixed: bool = False
    first: bool = False
    keep_end: bool = False
    middle: bool = False
    drop: int = 0
    styles: dict[str, str] | None = None
    justify: str = "left"


GAP = 2  # spaces between columns


@record
class Output:
    """Where human output goes and how it may look (design.md §7, §14).

    - ``terminal``: stdout is a terminal (or ``FORCE_COLOR`` is set): tables fit its
      width, ids are short and times relative. Otherwise (a pipe, a file) tables keep
      every character: full ids, exact RFC 3339 times, no width limit.
    - ``color``: colour, panels and glyphs; off under ``NO_COLOR``, with ``TERM=dumb``
      and when not on a terminal, on with ``FORCE_COLOR`` (``NO_COLOR`` wins).

    The streams, the environment those variables are read from and the record of the
    call's JSON error line are the call's (``Output.of`` its context); an Output made
    without them writes to nothing and reads an empty environment.
    """

    json_mode: bool = False
    stdout: TextIO = field(default_factory=io.StringIO)
    stderr: TextIO = field(default_factory=io.StringIO)
    # the call's choice (its context's ``color``); None: decided as said above
    color_choice: bool | None = None
    # the call's environment (NO_COLOR, FORCE_COLOR, TERM, COLUMNS, LINES)
    environ: Mapping[str, str] = field(default_factory=dict)
    # the stderr streams (by ``id``) that carry the call's one JSON error line already
    # (design.md §7): the call's own set, shared by every Output of the call
    error_lines: set[int] = field(default_factory=set)
    # the scope flags the call was given on its command line, which every command it
    # prints carries (design.md §14): the call's context's
    scope: Scope = NO_SCOPE
    # the scope notes told already in this call (the call's own set, shared)
    notes_told: set[str] = field(default_factory=set)
    # stdout and stderr are terminals (the call's context's flags); None: asked of the
    # streams, for an Output made without a context
    stdout_is_tty: bool | None = None
    stderr_is_tty: bool | None = None

    @classmethod
    def of(cls, ctx: Context, json_mode: bool) -> Output:
        """The output of the call ``ctx``: its streams, colour choice and environment."""
        return cls(
            json_mode,
            stdout=ctx.stdout if ctx.stdout is not None else io.StringIO(),
            stderr=ctx.stderr if ctx.stderr is not None else io.StringIO(),
            color_choice=ctx.color,
            environ=ctx.environ,
            error_lines=ctx.error_lines,
            scope=ctx.scope,
            notes_told=ctx.notes_told,
            stdout_is_tty=ctx.stdout_tty,
            stderr_is_tty=ctx.stderr_tty,
        )

    def _env_set(self, name: str) -> bool:
        return bool(self.environ.get(name))

    @property
    def tty(self) -> bool:
        """Standard output is a terminal: a person reads it."""
        return is_tty(self.stdout) if self.stdout_is_tty is None else self.stdout_is_tty

    @property
    def stderr_tty(self) -> bool:
        """Standard error is a terminal: a person sees what relay says there."""
        return is_tty(self.stderr) if self.stderr_is_tty is None else self.stderr_is_tty

    @property
    def terminal(self) -> bool:
        return not self.json_mode and (self.tty or self._env_set("FORCE_COLOR"))

    @property
    def color(self) -> bool:
        if self.color_choice is not None:
            return self.color_choice and not self.json_mode
        if not self.terminal or self._env_set("NO_COLOR"):
            return False
        return self._env_set("FORCE_COLOR") or self.environ.get("TERM") != "dumb"

    @property
    def rich(self) -> bool:
        """Decorated output (colour, panels): the same decision as ``color``."""
        return self.color

    @property
    def width(self) -> int | None:
        """The terminal's columns; None when not on a terminal (nothing is cut)."""
        return terminal_width(self.stdout, self.environ) if self.terminal else None

    @property
    def unicode(self) -> bool:
        encoding = (getattr(self.stdout, "encoding", None) or "").lower().replace("-", "")
        return encoding in ("utf8", "utf8sig")

    # ---------------------------------------------------------------- primitives
    def json(self, doc: object) -> None:
        self.stdout.write(json_text(doc, getattr(self.stdout, "encoding", None)) + "\n")
        self.stdout.flush()

    def line(self, text: str = "") -> None:
        self.stdout.write(text + "\n")

    def console(self) -> Console:
        return make_console(self.stdout, self.color, self.width, self.environ)

    def error(self, err: RelayError) -> None:
        if self.json_mode:
            self._error_line(err.to_dict(self.scope))
            return
        # a wait that ran out means "not yet" (design.md §1), never an error
        label = "not yet" if err.code in NOT_YET else "error"
        width = terminal_width(self.stderr, self.environ) if self.stderr_tty else None
        message = f"relay: {label}: {err.code}: {inert_line(err.message)}"
        lines = wrap_prose(message, width)
        # on a terminal, wrapped between words; a command keeps its line (design.md §14)
        lines += self.said_lines(Said.of("hint: ", *err.hint_said().parts), width)
        self.stderr.write("\n".join(lines) + "\n")
        if err.retry_after is not None:
            self.stderr.write(f"retry after: {err.to_dict()['retry_after_seconds']} s\n")
        self.stderr.flush()

    # ---------------------------------------------------------------- printed commands
    def command_lines(
        self, command: Command, lead: str = "", indent: str = "", width: int | None = None
    ) -> list[str]:
        """``command`` as this call prints it (design.md §14): with the call's scope flags,
        continued with `` \\`` on a terminal too narrow for it; one line when piped."""
        self._tell_note(command)
        return command.lines(self.scope, width or self.width, lead, indent)

    def _tell_note(self, *commands: Command) -> None:
        """Before the first command whose scope words need the person to know something
        (a URL whose password relay does not print, read from $RELAY_DATABASE_URL), say
        it on stderr, once a call (design.md §14). With --json nothing is said there:
        doctor's document has it as ``commands_note``."""
        note = self.scope.note
        if not note or note in self.notes_told or self.json_mode:
            return
        if any(c.scoped and c.program == "relay" for c in commands):
            self.notes_told.add(note)
            self.note(f"relay: {note}")

    def command(self, command: Command, lead: str = "", indent: str = "") -> None:
        """Print ``command`` on stdout (after ``lead``: ``next: ``, ``then: ``, ``→ ``)."""
        for ln in self.command_lines(command, lead, indent):
            self.line(ln)

    def said_lines(self, text: Said | str, width: int | None, indent: str = "  ") -> list[str]:
        """Prose that names commands, for a terminal ``width`` wide (None: not a terminal,
        never wrapped). Text is made inert and wrapped between words; an inline command is
        kept whole in backquotes, or, when it would not fit a line, set on lines of its own
        (continued with `` \\``); choices are one full command per line, piped too (JSON's
        hint has them on its one line: ``Said.text``)."""
        prose = said(text)
        self._tell_note(*prose.commands)
        lines: list[str] = []
        pending = ""

        def flush(keep: bool = False) -> None:
            nonlocal pending
            if pending.strip():
                lines.extend(wrap_prose(pending, width, indent))
            elif keep:
                lines.append(pending)
            pending = ""

        for part in prose.parts:
            if isinstance(part, Command):
                one = part.text(self.scope)
                if width is None or cell_len(one) + 2 <= width - len(indent):
                    pending += part.quoted(self.scope)
                    continue
                flush()
                lines.extend(part.lines(self.scope, width, indent=indent))
            elif isinstance(part, Choices):
                flush()
                for choice in part.commands:
                    lines.extend(choice.lines(self.scope, width, indent=indent))
            else:
                first, *more = inert(part).split("\n")
                pending += first
                for piece in more:  # a newline of the prose ends its line
                    flush(keep=True)
                    pending = piece
        flush()
        return lines or [""]

    def said(self, text: Said | str, stream: TextIO | None = None) -> None:
        """A sentence that may name commands, for the person: on stdout (or ``stream``),
        rendered by ``said_lines`` at the terminal's width."""
        target = self.stdout if stream is None else stream
        width = (
            self.width
            if stream is None
            else (
                terminal_width(target, self.environ)
                if is_tty(target) and not self.json_mode
                else None
            )
        )
        for ln in self.said_lines(text, width):
            target.write(ln + "\n")

    def _error_line(self, error: dict[str, Any]) -> None:
        """With --json, stderr carries one line, ``{"error": {...}}`` (design.md §7): the
        first error of the call is that line; a later one on the same stream (``relay
        run``'s heartbeat lost the session, then leaving failed) is not written."""
        if id(self.stderr) in self.error_lines:
            return
        self.error_lines.add(id(self.stderr))
        import json

        self.stderr.write(json.dumps({"error": error}) + "\n")
        self.stderr.flush()

    def waiting(self, text: str) -> None:
        """What a blocked command waits for, on stderr, only for a person: when stderr is a
        terminal and the output is not JSON (design.md §14)."""
        if self.json_mode or not self.stderr_tty:
            return
        self.note(text)

    def note(self, text: str | Said) -> None:
        """A line for the person on stderr -- in human output only. With --json, stderr
        carries nothing but the one error line (design.md §7), so a note is not written:
        whatever it tells must be a field of the JSON document. A note that names
        commands (a ``Said``) is rendered at stderr's width, with the call's scope."""
        if self.json_mode:
            return
        if isinstance(text, Said):
            width = terminal_width(self.stderr, self.environ) if self.stderr_tty else None
            text = "\n".join(self.said_lines(text, width))
        self.stderr.write(text + "\n")
        self.stderr.flush()

    # ---------------------------------------------------------------- shapes
    def fields(
        self,
        pairs: list[tuple[str, object]],
        title: str | None = None,
        styles: dict[str, dict[str, str]] | None = None,
    ) -> None:
        """Key/value lines. Values are treated as untrusted. ``styles``: key -> (value ->
        rich style), used when colour is on (a request's state, a ledger entry's)."""
        if self.rich:
            from rich.table import Table

            table = Table(
                show_header=False, box=None, title=title, title_justify="left", pad_edge=False
            )
            table.add_column(style="bold cyan", no_wrap=True)
            table.add_column()
            for k, v in pairs:
                table.add_row(k, _styled(v, (styles or {}).get(k, {})))
            self.console().print(table)
            return
        if title:
            self.line(title)
        width = max((len(k) for k, _ in pairs), default=0)
        for k, v in pairs:
            self.line(f"{k.ljust(width)}  {inert_line(v)}")

    def table(
        self,
        columns: Sequence[Col | str],
        rows: Sequence[Sequence[object]],
        title: str | None = None,
        empty: str = "(none)",
        tsv: bool = False,
    ) -> None:
        """A table: one line per row (design.md §14). On a terminal it fits the width
        (long cells end with an ellipsis), with colour when allowed; otherwise plain,
        full values, columns separated by two spaces -- or, with ``tsv`` (the tables a
        script reads: list, inbox, peers list, ledger list), by one tab each, after a
        header line of the column names (``cut -f``, ``awk -F'\t'``)."""
        cols = [c if isinstance(c, Col) else Col(c) for c in columns]
        if not self.terminal and tsv:
            if title:
                self.line(title)
            if not rows:
                self.line(empty)
                return
            self.line("\t".join(c.name for c in cols))
            for r in rows:
                self.line("\t".join(inert_line(v) for v in r))
            return
        if not self.terminal:
            if title:
                self.line(title)
            self.print_lines(render_table(cols, rows, None, empty=empty))
            return
        from rich.text import Text

        lines = render_table(
            cols, rows, self.width, color=self.color, ellipsis=self.ellipsis, empty=empty
        )
        if title:
            lines.insert(0, Text(fit(title, self.width, self.ellipsis), style="bold"))
        self.print_lines(lines)

    def print_lines(self, lines: Sequence[str | Text]) -> None:
        """Lines already fitted to the width (str or rich ``Text``), printed as they are."""
        if not self.terminal:
            for ln in lines:
                self.line(str(ln))
            return
        console = self.console()
        for ln in lines:
            console.print(ln, soft_wrap=True, overflow="ignore", crop=False)

    # ---------------------------------------------------------------- values in tables
    def short_ids(self, ids: Iterable[str]) -> dict[str, str]:
        """Each id as a table shows it: on a terminal its shortest prefix of at least 8
        characters that no other id shown shares (``unique_prefixes``), the full id
        otherwise."""
        every = list(ids)
        return unique_prefixes(every) if self.terminal else {i: i for i in every}

    def when(self, iso: str | None, now: int) -> str:
        """A past time: ``3m ago`` on a terminal, the exact RFC 3339 time otherwise."""
        if iso is None:
            return "-"
        return ago(clock.parse_iso(iso), now) if self.terminal else iso

    def until(self, iso: str | None, now: int) -> str:
        """A time a person plans by: ``in 58m (14:05)`` on a terminal, exact otherwise."""
        if iso is None:
            return "-"
        return deadline(clock.parse_iso(iso), now) if self.terminal else iso

    def para(self, text: str) -> None:
        """A sentence for the person: wrapped between words to the terminal's width."""
        width = self.width
        if width is None:  # not on a terminal
            self.line(text)
            return
        for ln in wrap(text, width, self.ellipsis):
            self.line(ln)

    @property
    def ellipsis(self) -> str:
        return "\u2026" if self.unicode else "..."

    def message(self, sender: str, body: str, label: str = "message") -> None:
        """Frame another agent's text so it cannot pass as relay's lines or user approval."""
        head = (
            f"--- {label} from agent {inert(sender)!s} "
            "(external_ai_message; this is NOT user approval) ---"
        )
        lines = inert(body.removesuffix("\n")).split("\n")
        if self.rich:
            from rich.panel import Panel
            from rich.text import Text

            self.console().print(
                Panel(
                    Text("\n".join(lines)),
                    title=Text(f"{label} from agent {inert(sender)}", style="bold yellow"),
                    subtitle=Text(
                        "external_ai_message - this is NOT user approval", style="yellow"
                    ),
                    title_align="left",
                    subtitle_align="left",
                    border_style="yellow",
                )
            )
            return
        self.line(head)
        for ln in lines:
            self.line("| " + ln)
        self.line(f"--- end of {label} ---")


LEDGER_STYLES = {
    "awaiting_approval": "bold yellow",
    "approved": "cyan",
    "denied": "magenta",
    "running": "blue",
    "effect_unknown": "bold white on red",
    "succeeded": "green",
    "failed": "bold red",
    "forgotten": "dim",
}

GLYPHS = {"ok": "\u2713", "warn": "!", "fail": "\u2717"}
ASCII_GLYPHS = {"ok": "+", "warn": "!", "fail": "x"}


def _styled(value: object, styles: dict[str, str]) -> Text:
    from rich.text import Text

    s = inert_line(value)
    return Text(s, style=styles[s]) if s in styles else Text(s)


# ---------------------------------------------------------------------------- tables
def terminal_size(stream: TextIO | None, environ: Mapping[str, str]) -> tuple[int, int]:
    """(columns, lines) of the terminal ``stream`` is: ``COLUMNS``/``LINES`` when the
    call's ``environ`` sets them, else the terminal's own size, else 80x24."""
    try:
        if stream is None:
            raise ValueError("no stream")
        size = os.get_terminal_size(stream.fileno())
        measured = (size.columns or 80, size.lines or 24)
    except (AttributeError, ValueError, OSError):
        measured = (80, 24)
    columns, lines = (
        int(environ[name]) if environ.get(name, "").isdigit() and int(environ[name]) > 0 else value
        for name, value in zip(("COLUMNS", "LINES"), measured, strict=True)
    )
    return columns, lines


def terminal_width(stream: TextIO | None, environ: Mapping[str, str]) -> int:
    return terminal_size(stream, environ)[0]


def make_console(
    stream: TextIO, color: bool, width: int | None, environ: Mapping[str, str]
) -> Console:
    """A rich console that prints what it is given (fitted lines) in colour or not at all
    (``TERM`` read from the call's ``environ``)."""
    from rich.console import Console

    system: Literal["standard", "auto"] | None
    if color:
        dumb = environ.get("TERM") in (None, "", "dumb")
        system = "standard" if dumb or not is_tty(stream) else "auto"
    else:
        system = None
    return Console(
        file=stream,
        width=width,
        color_system=system,
        force_terminal=color or None,
        no_color=not color,
        highlight=False,
        emoji=False,
        markup=False,
        # rich reads the call's environment too, not the process's: ``_environ`` is not
        # in rich's documented parameters (tests/core/test_output.py fails if it goes)
        _environ=environ,
    )


def cell_len(text: str) -> int:
    from rich.cells import cell_len as rich_cell_len

    return rich_cell_len(text)


def fit(
    text: str,
    width: int | None,
    ellipsis: str = "\u2026",
    keep_end: bool = False,
    middle: bool = False,
) -> str:
    """``text`` cut to ``width`` terminal cells, ending with the ellipsis when cut
    (``keep_end``: starting with it, the end kept; ``middle``: the ellipsis in the middle,
    start and end kept)."""
    if width is None or cell_len(text) <= width:
        return text
    if width <= len(ellipsis):
        return ellipsis[:width]
    from rich.cells import set_cell_size

    room = width - cell_len(ellipsis)
    if middle and room >= 4:
        words = _words_around(text, room)
        if words is not None:
            return words[0] + ellipsis + words[1]
        head = set_cell_size(text, (room + 1) // 2)
        tail = set_cell_size(text[::-1], room // 2)[::-1]
        return head + ellipsis + tail
    if keep_end:
        tail = set_cell_size(text[::-1], room)[::-1]
        return ellipsis + tail
    return set_cell_size(text, room) + ellipsis


# what separates the words of a name or a reason (`claude-code-reviewer-frontend`)
_WORD_BREAKS = "-_./ "


def _words_around(text: str, room: int) -> tuple[str, str] | None:
    """Whole words from the start and from the end of ``text`` that fit ``room`` cells
    together, the end's first (it tells ``…-frontend`` from ``…-backend``); the separators
    beside the ellipsis left out. None when not even one word of each fits."""
    cuts = [i for i, ch in enumerate(text) if ch in _WORD_BREAKS]
    best: tuple[int, int, str, str] | None = None
    for t in cuts:
        tail = text[t + 1 :]
        for h in cuts:
            head = text[:h]
            if not head or not tail or h >= t:
                continue
            size = cell_len(head) + cell_len(tail)
            if size <= room and (best is None or (size, cell_len(tail)) > best[:2]):
                best = (size, cell_len(tail), head, tail)
    return None if best is None else (best[2], best[3])


def wrap(text: str, width: int, ellipsis: str = "\u2026") -> list[str]:
    """``text`` wrapped between words to ``width`` cells; a single word longer than the
    line (a path) is cut with the ellipsis, never folded."""
    import textwrap

    lines = textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)
    return [fit(ln, width, ellipsis) for ln in lines] or [""]


_COMMAND_SPAN = r"`[^`]*`|eval \"\$\([^)]*\)\""


def wrap_prose(text: str, width: int | None, indent: str = "  ") -> list[str]:
    """A sentence for a terminal ``width`` wide, wrapped between words, never inside a
    word and never inside a command it names (in backquotes, or an ``eval "$(...)"``
    line), so what a person copies is whole on one line; continuation lines are indented.
    ``width`` None (not a terminal): the text as it is, one line."""
    if width is None or cell_len(text) <= width:
        return [text]
    import textwrap

    glue = "\x00"  # a space inside a command: not a place to break
    joined = re.sub(_COMMAND_SPAN, lambda m: m.group().replace(" ", glue), text)
    lines = textwrap.wrap(
        joined,
        max(20, width),
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return [ln.replace(glue, " ") for ln in lines] or [text]


def column_widths(
    cols: list[Col],
    cells: list[list[str]],
    width: int | None,
    measure: Callable[[str], int] = len,
) -> list[int]:
    """Each column's width: its widest cell, then, when the line is wider than ``width``,
    the widest column that may shrink gives a cell, again and again, down to its ``min``
    (columns marked ``first`` before the others)."""
    natural = [max([measure(c.name)] + [measure(r[i]) for r in cells]) for i, c in enumerate(cols)]
    widths = list(natural)
    if width is None:
        return widths
    excess = sum(widths) + GAP * (len(cols) - 1) - width
    while excess > 0:
        shrinkable = [
            i for i, c in enumerate(cols) if not c.fixed and widths[i] > min(c.min, natural[i])
        ]
        if not shrinkable:
            break
        widest = max(shrinkable, key=lambda i: (cols[i].first, widths[i]))
        widths[widest] -= 1
        excess -= 1
    return widths


def render_table(
    cols: list[Col],
    rows: Sequence[Sequence[object]],
    width: int | None,
    *,
    color: bool = False,
    ellipsis: str = "\u2026",
    empty: str = "(none)",
    indent: int = 0,
) -> list[str | Text]:
    """The one table renderer: a header line and one line per row, borderless.

    ``width`` None (not a terminal): plain strings with every character of every cell.
    Otherwise rich ``Text`` lines no wider than ``width``: long cells are cut with the
    ellipsis, never folded; with ``color`` the header is bold and cells are styled by
    their column's ``styles``. Every cell passes through ``inert_line``.
    """
    cells = [[inert_line(v) for v in r] for r in rows]
    pad = " " * indent
    if width is None:
        if not rows:
            return [pad + empty]
        widths = column_widths(cols, cells, None)
        plain: list[str | Text] = [pad + _join([c.name for c in cols], cols, widths)]
        return plain + [pad + _join(r, cols, widths) for r in cells]
    from rich.text import Text

    inner = max(1, width - indent)
    if not rows:
        return [Text(pad + fit(empty, inner, ellipsis), style="dim" if color else "")]
    cols, cells, left_out = _leave_out(cols, cells, inner)
    widths = column_widths(cols, cells, inner, cell_len)
    header = Text(pad)
    for i, (c, w) in enumerate(zip(cols, widths, strict=True)):
        header.append(_cell(c.name, w, c, ellipsis), style="bold" if color else "")
        header.append(" " * GAP if i < len(cols) - 1 else "")
    header.rstrip()
    lines: list[str | Text] = [_cut(header, width, ellipsis)]
    for r in cells:
        line = Text(pad)
        for i, (c, w, v) in enumerate(zip(cols, widths, r, strict=True)):
            style = (c.styles or {}).get(v, "") if color else ""
            line.append(_cell(v, w, c, ellipsis), style=style)
            line.append(" " * GAP if i < len(cols) - 1 else "")
        line.rstrip()
        lines.append(_cut(line, width, ellipsis))
    if left_out:
        said = f"({', '.join(left_out)} left out at this width; piped or --json, every column)"
        lines.append(Text(pad + fit(said, inner, ellipsis), style="dim" if color else ""))
    return lines


def _leave_out(
    cols: list[Col], cells: list[list[str]], width: int
) -> tuple[list[Col], list[list[str]], list[str]]:
    """The columns that stay when even the narrowest of them do not fit ``width``: those
    with a ``drop`` go, 1 first, until the rest fit (design.md §14). Returns the columns,
    the cells and the names left out."""
    left_out: list[str] = []
    while True:
        natural = [
            max([cell_len(c.name)] + [cell_len(r[i]) for r in cells]) for i, c in enumerate(cols)
        ]
        narrowest = sum(
            n if c.fixed else min(c.min, n) for c, n in zip(cols, natural, strict=True)
        ) + GAP * (len(cols) - 1)
        droppable = [i for i, c in enumerate(cols) if c.drop]
        if narrowest <= width or not droppable:
            return cols, cells, left_out
        i = min(droppable, key=lambda i: cols[i].drop)
        left_out.append(cols[i].name)
        cols = cols[:i] + cols[i + 1 :]
        cells = [r[:i] + r[i + 1 :] for r in cells]


def _cell(value: str, width: int, col: Col, ellipsis: str) -> str:
    text = fit(value, width, ellipsis, col.keep_end, col.middle)
    gap = " " * (width - cell_len(text))
    return gap + text if col.justify == "right" else text + gap


def _cut(line: Text, width: int, ellipsis: str) -> Text:
    """The last resort when even the narrowest columns are too wide: cut the line."""
    if line.cell_len <= width:
        return line
    line.truncate(max(0, width - len(ellipsis)))
    line.append(ellipsis)
    return line


def _join(values: list[str], cols: list[Col], widths: list[int]) -> str:
    parts = [
        v.rjust(w) if c.justify == "right" else v.ljust(w)
        for v, c, w in zip(values, cols, widths, strict=True)
    ]
    return (" " * GAP).join(parts).rstrip()


# ---------------------------------------------------------------------------- ids
SHORT_ID = 8


def unique_prefixes(ids: Iterable[str], minimum: int = SHORT_ID) -> dict[str, str]:
    """Each id's shortest prefix, at least ``minimum`` characters, that no other of
    ``ids`` starts with (as git shortens hashes, design.md §14): two ids that share their
    first 8 characters are shown with as many more as tell them apart, so either typed
    back names one request. A prefix never ends on a hyphen (it takes the next digit)."""
    ordered = sorted(set(ids))
    out: dict[str, str] = {}
    for i, rid in enumerate(ordered):
        n = minimum
        for other in ordered[max(0, i - 1) : i] + ordered[i + 1 : i + 2]:
            n = max(n, len(os.path.commonprefix([rid, other])) + 1)
        if n < len(rid) and rid[n - 1] == "-":
            n += 1
        out[rid] = rid[:n]
    return out


# ---------------------------------------------------------------------------- times
# The one way relay writes a span of time for a person (design.md §14): ``45s``, ``2m``,
# ``1h59m``, ``2d3h``. It lives in clock (which output imports; never the other way round),
# and every relative time below uses it.
duration = clock.human_duration


def age(ms: int | None, now: int) -> str:
    """How long ago, without a unit suffix (``3m``); ``-`` for none."""
    if ms is None:
        return "-"
    return duration(max(0, now - ms) / 1000)


def ago(ms: int | None, now: int) -> str:
    """``3m ago`` (or ``in 3m`` for a time still ahead); ``-`` for none."""
    if ms is None:
        return "-"
    if ms > now + 999:
        return f"in {duration((ms - now) / 1000)}"
    return f"{age(ms, now)} ago"


def local_clock(ms: int, now: int) -> str:
    """The local clock time a person plans by: ``14:05`` today or within 12 hours (the
    relative time beside it says which day: ``in 59m (00:05)``), ``Wed 14:05`` within the
    week, the date beyond."""
    from datetime import datetime

    at, today = datetime.fromtimestamp(ms / 1000), datetime.fromtimestamp(now / 1000)
    if at.date() == today.date() or abs(ms - now) < 12 * 3600 * 1000:
        return at.strftime("%H:%M")
    if abs(ms - now) < 6 * 86400 * 1000:
        return at.strftime("%a %H:%M")
    return at.strftime("%Y-%m-%d")


def deadline(ms: int | None, now: int) -> str:
    """``in 58m (14:05)``: relative, with the local clock time; a passed one ``3s ago (14:05)``."""
    if ms is None:
        return "-"
    return f"{ago(ms, now)} ({local_clock(ms, now)})"


def iso_age(iso: str | None, now: int) -> str:
    return "-" if iso is None else age(clock.parse_iso(iso), now)


def iso_left(iso: str | None, now: int) -> str:
    return "-" if iso is None else duration(max(0, clock.parse_iso(iso) - now) / 1000)


def size(n: int | None) -> str:
    """Bytes for a person: ``512 B``, ``1.1 KiB``, ``164.0 KiB``, ``2.3 MiB``."""
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"
