"""`relay doctor` as printed (design.md §11): on a terminal, one line per area, the
problems with their commands, the counts, cut to the terminal's height; else a plain
table. It uses only core.output's primitives (and rich, imported when it prints)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core.output import (
    ASCII_GLYPHS,
    GAP,
    GLYPHS,
    Output,
    cell_len,
    fit,
    inert_line,
    terminal_size,
    wrap,
)
from .report import OK

if TYPE_CHECKING:
    from rich.text import Text

    from ...core.command import Command
    from .report import Check, Report

STYLES = {"ok": "green", "warn": "bold yellow", "fail": "bold white on red"}


def render(out: Output, report: Report, verbose: bool = False) -> None:
    """design.md §11. On a terminal: one line per area (every check with -v), then the
    problems, each whole with the command that fixes it on a `→` line, then the counts:
    what a person must act on is what stays on the screen when doctor ends. When the
    problems written in full would not fit the terminal's height, each takes one line (its
    detail cut) and its command. Not on a terminal: a plain table, every detail whole, in
    the same order."""
    counts = report.counts()
    summary = f"relay doctor: {counts['fail']} fail, {counts['warn']} warn, {counts['ok']} ok"
    oks = [c for c in report.checks if c.status == OK]
    width = out.width
    if width is None:  # not on a terminal
        out.table(
            ["status", "check", "detail"],
            [[c.status, c.name, c.to_json(out.scope)["detail"]] for c in oks + report.problems()],
        )
        out.line(summary)
        if report.facts.get("commands_note"):
            out.line(f"note: {report.facts['commands_note']}")
        return
    _DoctorScreen(out, width).render(report, oks, summary, verbose)


class _DoctorScreen:
    """doctor on a terminal (design.md §11): the area lines, the problems grouped by their
    command, the counts; cut to the terminal's height when the problems do not fit."""

    STATUS_W = 2 + len("fail")

    def __init__(self, out: Output, width: int) -> None:
        self.out = out
        self.glyphs, self.arrow = (GLYPHS, "\u2192 ") if out.unicode else (ASCII_GLYPHS, "-> ")
        self.width, self.rows = width, terminal_size(out.stdout, out.environ)[1]
        self.bold = "bold" if out.color else ""
        self.indent = " " * (self.STATUS_W + GAP)
        self.inner = max(12, self.width - len(self.indent))

    def head(self, status: str, label: str, w: int) -> Text:
        from rich.text import Text

        return Text(
            f"{self.glyphs[status]} {label}".ljust(w) + " " * GAP,
            style=STYLES[status] if self.out.color else "",
        )

    def areas(self, report: Report, oks: list[Check], verbose: bool) -> list[Text]:
        """One line per area; with -v, every ok check under its area, whole."""
        from rich.text import Text

        groups = report.groups()
        group_w = 2 + max(len(g) for g, _, _ in groups)
        top: list[Text] = []
        for group, status, text in groups:
            top.append(
                self.head(status, group, group_w)
                + Text(fit(inert_line(text), self.width - group_w - GAP, self.out.ellipsis))
            )
            if verbose:
                indent = " " * (group_w + GAP)
                for c in (c for c in oks if c.group == group):
                    # continuation lines are indented 2 more: wrapped 2 narrower, so no
                    # line runs past the terminal's width (design.md §14)
                    first, *rest = _wrap_whole(
                        f"{c.name}: {inert_line(c.detail)}", self.width - len(indent)
                    )
                    rest = _wrap_whole(" ".join(rest), self.width - len(indent) - 2) if rest else []
                    top += [Text(indent + first)] + [Text(indent + "  " + ln) for ln in rest]
        return top

    def command(self, fix: Command | None) -> list[Text]:
        """The command on its `→` line(s), with the call's scope flags (design.md §14)."""
        from rich.text import Text

        if not fix:
            return []
        return [
            Text(ln, style=self.bold)
            for ln in self.out.command_lines(fix, self.arrow, self.indent, self.width)
        ]

    def whole(self, checks: list[Check]) -> list[Text]:
        """Each detail whole, wrapped between words, and the command they share."""
        from rich.text import Text

        lines: list[Text] = []
        for c in checks:
            first, *rest = wrap(f"{c.name}: {inert_line(c.detail)}", self.inner, self.out.ellipsis)
            lines.append(
                self.head(c.status, c.status, self.STATUS_W) + Text(first, style=self.bold)
            )
            lines += [Text(self.indent + more) for more in rest]
        return lines + self.command(checks[0].fix)

    def one_line(self, checks: list[Check]) -> list[Text]:
        """Each problem on a line of its own (its name and the start of its detail: which
        session lapsed, which lease ran out), and the command they share."""
        from rich.text import Text

        return [
            self.head(c.status, c.status, self.STATUS_W)
            + Text(
                fit(inert_line(f"{c.name}: {c.detail}"), self.inner, self.out.ellipsis),
                style=self.bold,
            )
            for c in checks
        ] + self.command(checks[0].fix)

    def render(self, report: Report, oks: list[Check], summary: str, verbose: bool) -> None:
        from rich.text import Text

        top = self.areas(report, oks, verbose)
        # the problems: those that share one command are listed together, above it (a warn
        # under the fail before it that the same command settles; each keeps its own status)
        shared: dict[Command | int, list[Check]] = {}  # by the command, else each alone
        for c in report.problems():
            shared.setdefault(c.fix or id(c), []).append(c)
        tail = [Text(summary, style=self.bold)]
        if report.facts.get("commands_note"):
            tail += [
                Text(ln)
                for ln in wrap(
                    f"note: {report.facts['commands_note']}", self.width, self.out.ellipsis
                )
            ]
        entries = [[self.whole(checks), self.one_line(checks)] for checks in shared.values()]
        chosen = [full for full, _ in entries]
        more = [
            Text(ln)
            for ln in self.out.command_lines(
                report.cmd("doctor", "-v"), "each problem in full: ", width=self.width
            )
        ]
        budget = self.rows - 1 - _rows(tail, self.width)  # the prompt takes the last row
        if not verbose and _rows([ln for e in chosen for ln in e], self.width) > budget:
            # the line that names `doctor -v` stays on the last screen; the area lines
            # too when there is room, else they scroll away above the problems
            budget -= _rows(more, self.width)
            chosen, budget = self.cut(entries, top, budget)
            top += more
        self.out.print_lines(top + [ln for e in chosen for ln in e] + tail)

    def cut(
        self, entries: list[list[list[Text]]], above: list[Text], budget: int
    ) -> tuple[list[list[Text]], int]:
        """All on one line each, then whole again, in order, as long as everything fits:
        with the area lines (``above``) on the screen too when there is room for that."""
        width = self.width
        chosen = [short for _, short in entries]
        if _rows(above + [ln for e in chosen for ln in e], width) <= budget:
            budget -= _rows(above, width)
        for i, (full, short) in enumerate(entries):
            used = _rows([ln for e in chosen for ln in e], width)
            if used - _rows(short, width) + _rows(full, width) <= budget:
                chosen[i] = full
        return chosen, budget


def _wrap_whole(text: str, width: int) -> list[str]:
    """Wrapped between words; a word longer than the line (a path, a URL) stays whole."""
    import textwrap

    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]


def _rows(lines: list[Text], width: int) -> int:
    """Terminal rows the lines take (a line wider than the terminal wraps)."""

    return sum(max(1, -(-cell_len(ln.plain) // width)) for ln in lines)
