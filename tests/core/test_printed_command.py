"""The printed-command value (design.md §14): its words, its scope flags, and how it is
rendered on one line and on a terminal of any width."""

from __future__ import annotations

import shlex

import pytest

from relay_cli.core.command import (
    Choices,
    Raw,
    Said,
    Scope,
    placeholder,
    relay,
    shell,
)
from relay_cli.core.output import Output

HOME = Scope(("--home", "/tmp/a home/with spaces"))
ID = "2b9e2f4a-1b3c-4d5e-8f90-a1b2c3d4e5f6"


def _joined(lines: list[str]) -> str:
    """What the shell reads from the lines pasted: each `` \\``-newline joins them."""
    return "\n".join(lines).replace(" \\\n", " ")


@pytest.mark.parametrize("width", [20, 40, 60, 80, 200, None])
def test_every_width_pastes_as_the_same_words(width):
    cmd = relay("reply", ID, tail=("-",))
    lines = cmd.lines(HOME, width, lead="then: ")
    assert lines[0].startswith("then: relay reply")
    assert all(ln.endswith(" \\") for ln in lines[:-1])
    pasted = _joined(lines).removeprefix("then: ")
    assert shlex.split(pasted) == ["relay", "reply", ID, "--home", "/tmp/a home/with spaces", "-"]
    if width is not None:
        # a line is wider than the terminal only when it holds one piece (a word, or an
        # option and its value) and what leads it
        pieces = {ID, "--home '/tmp/a home/with spaces'", "relay", "reply", "-"}
        for ln in lines:
            body = ln.removeprefix("then: ").strip().removesuffix(" \\")
            assert len(ln) <= width or body in pieces or body == "relay reply", ln


def test_an_option_and_its_value_stay_on_one_line():
    lines = relay("resolve", ID, "--outcome", "completed", changes=True).lines(HOME, 30)
    assert any("--outcome completed" in ln for ln in lines)
    assert any("--home '/tmp/a home/with spaces'" in ln for ln in lines)


def test_scope_flags_come_before_the_tail_and_only_on_relay_commands():
    assert relay("once", "--key", "k", tail=("--", "make", "x y")).text(HOME) == (
        "relay once --key k --home '/tmp/a home/with spaces' -- make 'x y'"
    )
    assert shell("unset", "RELAY_TIME_OFFSET").text(HOME) == "unset RELAY_TIME_OFFSET"
    assert relay("id", scoped=False).text(HOME) == "relay id"
    assert relay("list").text() == "relay list"


def test_words_are_quoted_so_no_alternative_becomes_a_pipeline():
    # a word that holds shell syntax is one quoted word, never a pipeline or a subshell
    assert relay("show", "a|b").text() == "relay show 'a|b'"
    assert relay("send", "(x)").text() == "relay send '(x)'"
    # relay's own shell syntax is written as it is
    url = Raw('"${RELAY_DATABASE_URL:?export it first}"')
    assert relay("list").text(Scope(("--database-url", url))) == (
        'relay list --database-url "${RELAY_DATABASE_URL:?export it first}"'
    )


def test_an_eval_join_wraps_inside_its_substitution():
    cmd = relay("peers", "join", "bob", "--kind", "human", "--shell", form="eval")
    assert cmd.text(HOME) == (
        "eval \"$(relay peers join bob --kind human --shell --home '/tmp/a home/with spaces')\""
    )
    lines = cmd.lines(HOME, 40, lead="run: ")
    assert lines[0].startswith('run: eval "$(relay peers join')
    assert lines[-1].endswith(')"')


def test_a_command_that_changes_something_names_every_word():
    with pytest.raises(ValueError):
        relay("resolve", placeholder("ID"), "--outcome", "failed", changes=True)
    assert relay("show", placeholder("ID")).text() == "relay show ID"
    with pytest.raises(ValueError):
        relay("show", "two\nlines")


def test_choices_are_one_full_command_per_line_on_a_terminal_and_backquoted_in_text():
    choices = Choices(
        tuple(relay("resolve", ID, "--outcome", o, changes=True) for o in ("completed", "failed"))
    )
    prose = Said.of("settle it with one of: ", choices)
    assert prose.text(HOME).count("`relay resolve") == 2
    assert " or `relay resolve" in prose.text()
    lines = Output(scope=HOME).said_lines(prose, 80)
    starts = [ln.strip() for ln in lines if ln.strip().startswith("relay resolve")]
    assert len(starts) == 2
    assert "|" not in "".join(lines)


def test_an_inline_command_stays_whole_in_backquotes():
    prose = Said.of("take it first: ", relay("claim", "--id", ID), " and read it")
    lines = Output(scope=HOME).said_lines(prose, 60)
    text = "\n".join(lines)
    # too long for a line of 60: set on lines of its own, pasteable
    assert "`" not in text
    block = [ln for ln in lines if "relay claim" in ln or ln.strip().startswith("--")]
    assert shlex.split(_joined(block)) == [
        "relay",
        "claim",
        "--id",
        ID,
        "--home",
        "/tmp/a home/with spaces",
    ]
    short = Output().said_lines(Said.of("see ", relay("list"), " for all"), 80)
    assert short == ["see `relay list` for all"]
