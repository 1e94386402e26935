"""Integer options are read in ASCII, as ids, keys and durations are (design.md §6):
Python's int() would take other scripts' digits ('٣'), spaces and underscores."""

from __future__ import annotations

import pytest
import typer
from conftest import refused

from relay_cli.cli.app import WholeNumber, app


def _params(cmd, path=()):
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _params(sub, (*path, name))


@pytest.mark.one_backend
def test_every_integer_option_takes_only_ascii_digits():
    import relay_cli.cli.commands  # noqa: F401  (registers every command)

    found = []
    for path, cmd in _params(typer.main.get_command(app)):
        for p in cmd.params:
            if {c.__name__ for c in type(p.type).__mro__} & {
                "IntParamType",
                "FloatParamType",
                "FuncParamType",
            }:
                found.append((" ".join(path), p.name))
            if isinstance(p.type, WholeNumber):
                found.append(("ok", p.name))
    assert [f for f in found if f[0] != "ok"] == [], "integer options must use WholeNumber"
    assert {n for ok, n in found if ok == "ok"} >= {"limit", "max_attempts"}


@pytest.mark.parametrize("value", ["٣", "３", " 3", "3 ", "1_0", "+3", "-1", "3.0", ""])
def test_non_ascii_or_decorated_digits_are_usage_errors_and_change_nothing(world, value):
    relay, alice, _ = world
    err = refused(
        relay,
        "usage_error",
        "send",
        "--to",
        "bob",
        "--max-attempts",
        value,
        "--on-lost",
        "redeliver",
        "hi",
        env=alice,
    )
    assert "--max-attempts" in err["message"]
    err = refused(relay, "usage_error", "list", "--limit", value)
    assert "--limit" in err["message"]


def test_ascii_digits_still_work(world):
    relay, alice, _ = world
    r = relay(
        "send",
        "--to",
        "bob",
        "--max-attempts",
        "7",
        "--on-lost",
        "redeliver",
        "--json",
        "hi",
        env=alice,
    )
    assert r.code == 0 and r.json["max_attempts"] == 7
    assert relay("list", "--limit", "1", "--json").json["requests"][0]["id"] == r.json["id"]
    refused(relay, "usage_error", "list", "--limit", "0")
    refused(relay, "usage_error", "send", "--to", "bob", "--max-attempts", "101", "hi", env=alice)
