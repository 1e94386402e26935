"""A command relay prints for someone to run, as one value (design.md §14).

Every part that decides on a command (a hint, a ``next:`` line, a doctor fix, a note)
returns a ``Command``: the program, its words, whether it changes anything. Only the
output layer renders one, with the call's ``Scope`` (the scope flags the call was given on
its command line) and the terminal's width; the library never writes a command as text.
A command that changes something cannot hold a placeholder (``ID``, ``NAME``): relay
prints it only where it knows every word, and choices are several full commands.

Rendered, a command is one line of shell words, each quoted as the shell needs
(``shlex``), so pasted into bash or zsh it runs that one command with those arguments.
On a terminal too narrow for it, it goes on over several lines, each ending in `` \\``
(the shell joins them), broken only between words and never between an option and its
value. Prose that names commands (an error's detail, a note) is a ``Said``: text and
commands in order, rendered the same way.
"""

from __future__ import annotations

import re
import shlex

from .record import field, record


class Raw(str):
    """A word written into the command as it is, unquoted: shell syntax the shell must
    read (``"${RELAY_DATABASE_URL:?export it first}"``). Only relay's own code makes one."""


class Placeholder(Raw):
    """A word the reader fills in (``ID``, ``NAME``, ``KEY``): allowed only in a command
    that changes nothing (design.md §14)."""


# A placeholder is an upper-case word: ID, NAME, KEY, RUNTIME, TEXT.
_PLACEHOLDER = re.compile(r"[A-Z][A-Z_]*\Z")


def placeholder(name: str) -> Placeholder:
    if not _PLACEHOLDER.match(name):
        raise ValueError(f"a placeholder is an upper-case word, not {name!r}")
    return Placeholder(name)


@record(frozen=True)
class Scope:
    """The scope flags a printed ``relay`` command carries: those the call was given on
    its command line (``--home DIR``, ``--database-url URL`` without a password), so the
    command acts on the same home or database when pasted into the same shell. A scope
    from the environment (``RELAY_HOME``, ``RELAY_DATABASE_URL``) stays there: the pasted
    command inherits it. ``note``: what a person must know for the words to work (a URL
    whose password relay does not print)."""

    words: tuple[str, ...] = ()
    note: str | None = None
    # the call's database URL as one shell word, for another program (``psql``); the
    # environment's variable when the URL came from there
    url_word: str | None = None

    def __bool__(self) -> bool:
        return bool(self.words)


NO_SCOPE = Scope()


@record(frozen=True)
class Command:
    """One command for someone to run (design.md §14).

    ``args``: the words after the program. ``tail``: words that stay last, after the
    scope flags (``-`` for text on standard input, ``-- CMD ARGS``). ``changes``: it
    settles, approves, denies, deletes, changes modes or state; such a command holds no
    placeholder. ``scoped``: a relay command that acts on a home or database takes the
    call's scope flags; False for another program, for ``relay id``, and for a command
    that names its own ``--home``. ``form``: ``eval`` prints ``eval "$(...)"`` around it
    (a ``--shell`` join, whose export lines must reach this shell).
    """

    args: tuple[str, ...]
    program: str = "relay"
    tail: tuple[str, ...] = ()
    changes: bool = False
    scoped: bool = True
    form: Literal["plain", "eval"] = "plain"

    def __post_init__(self) -> None:
        for word in (self.program, *self.args, *self.tail):
            if not isinstance(word, str) or "\n" in word or "\x00" in word:
                raise ValueError(f"a command word is one line of text, not {word!r}")
        if self.changes and self.placeholders:
            raise ValueError(
                f"a command that changes something names every word: {self.placeholders}"
            )

    @property
    def placeholders(self) -> tuple[str, ...]:
        return tuple(w for w in (*self.args, *self.tail) if isinstance(w, Placeholder))

    def words(self, scope: Scope = NO_SCOPE) -> list[str]:
        """The shell words, quoted: program, args, the scope flags, tail."""
        flags = scope.words if self.scoped and self.program == "relay" else ()
        return [_quote(w, scope) for w in (self.program, *self.args, *flags, *self.tail)]

    def text(self, scope: Scope = NO_SCOPE) -> str:
        """The command on one line, as pasted (JSON hints, a piped screen, the web)."""
        line = " ".join(self.words(scope))
        return f'eval "$({line})"' if self.form == "eval" else line

    def lines(
        self, scope: Scope = NO_SCOPE, width: int | None = None, lead: str = "", indent: str = ""
    ) -> list[str]:
        """The command for a terminal ``width`` wide (None: one line), after ``lead`` on
        the first line; every line but the last ends in `` \\`` and the next starts with
        ``indent`` and two spaces. A break falls between words only, never between an
        option and its value; a word wider than the line stays whole on its own line."""
        units = _units(self.words(scope))
        if self.form == "eval":
            units[0] = 'eval "$(' + units[0]
            units[-1] = units[-1] + ')"'
        first = indent + lead
        if width is None:
            return [first + " ".join(units)]
        lines: list[str] = []
        current = first + units[0]
        more = indent + "  "
        for unit in units[1:]:
            if len(current) + 1 + len(unit) + 2 <= width:
                current += " " + unit
            else:
                lines.append(current + " \\")
                current = more + unit
        lines.append(current)
        return lines

    def quoted(self, scope: Scope = NO_SCOPE) -> str:
        """The command inside prose: in backquotes, except an ``eval "$(...)"`` line,
        whose own quotes delimit it."""
        return self.text(scope) if self.form == "eval" else f"`{self.text(scope)}`"

    def __str__(self) -> str:
        return self.text()


def relay(
    *args: str,
    tail: tuple[str, ...] = (),
    changes: bool = False,
    scoped: bool = True,
    form: Literal["plain", "eval"] = "plain",
) -> Command:
    """``relay ARGS…``: the usual way to make one."""
    return Command(tuple(args), tail=tail, changes=changes, scoped=scoped, form=form)


def shell(program: str, *args: str, changes: bool = False) -> Command:
    """Another program's command (``unset``, ``mv``, ``psql``): never takes relay's flags."""
    return Command(tuple(args), program=program, changes=changes, scoped=False)


def _quote(word: str, scope: Scope) -> str:
    if isinstance(word, DatabaseUrl):
        return _quote(scope.url_word, NO_SCOPE) if scope.url_word else str(word)
    return str(word) if isinstance(word, Raw) else shlex.quote(word)


def _units(words: list[str]) -> list[str]:
    """The words as the pieces a line may break between: an option and its value are one
    (``--home /x``), every other word is its own."""
    units: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        takes_value = word.startswith("--") and word != "--" and "=" not in word
        if takes_value and i + 1 < len(words) and not words[i + 1].startswith("-"):
            units.append(f"{word} {words[i + 1]}")
            i += 2
        else:
            units.append(word)
            i += 1
    return units


@record(frozen=True)
class Choices:
    """Several commands, one of which the reader runs (``resolve`` with each outcome):
    each is printed whole, on a line of its own (design.md §14)."""

    commands: tuple[Command, ...]


# A piece of prose that names commands: text, a command shown inline, or choices.
TYPE_CHECKING = False  # (typing's, without importing typing: design.md §18)
if TYPE_CHECKING:
    from typing import Literal, Union

    Part = Union[str, Command, Choices]


@record(frozen=True)
class Said:
    """Prose with commands in it (an error's detail, a note), in order. Rendered by the
    output layer: ``text`` for one line (JSON's ``hint``: an inline command in backquotes,
    choices as ```a`, `b` or `c```), ``Output`` for a terminal (choices one per line)."""

    parts: tuple[Part, ...] = field(default_factory=tuple)

    @classmethod
    def of(cls, *parts: Part) -> Said:
        return cls(tuple(p for p in parts if p != ""))

    def __bool__(self) -> bool:
        return bool(self.parts)

    def __add__(self, other: Said | str) -> Said:
        more = (other,) if isinstance(other, str) else other.parts
        return Said(self.parts + more)

    @property
    def commands(self) -> tuple[Command, ...]:
        found: list[Command] = []
        for part in self.parts:
            if isinstance(part, Command):
                found.append(part)
            elif isinstance(part, Choices):
                found.extend(part.commands)
        return tuple(found)

    def text(self, scope: Scope = NO_SCOPE) -> str:
        """On one line: inline commands in backquotes, choices as `a`, `b` or `c`."""
        out: list[str] = []
        for part in self.parts:
            if isinstance(part, Command):
                out.append(part.quoted(scope))
            elif isinstance(part, Choices):
                shown = [f"`{c.text(scope)}`" for c in part.commands]
                out.append(
                    shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]
                )
            else:
                out.append(part)
        return "".join(out)

    def __str__(self) -> str:
        return self.text()


def said(value: Said | str | None) -> Said:
    """``value`` as prose: a plain string is text without commands."""
    if value is None:
        return Said()
    return value if isinstance(value, Said) else Said((value,))


class DatabaseUrl(Raw):
    """Where a command names this call's database for another program (``psql URL``): the
    renderer writes the scope's word for it (the URL without a password, or the variable
    that holds it)."""


DATABASE_URL = DatabaseUrl('"$RELAY_DATABASE_URL"')
