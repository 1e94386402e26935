"""`relay --home DIR CMD` is `relay CMD --home DIR` (design.md §14): the scope option may
stand before the command's name, and the commands the call prints carry it."""

from __future__ import annotations

import pytest
from conftest import new_id


@pytest.mark.sqlite_only
def test_home_before_the_command_names_the_home(relay, tmp_path):
    alice = relay.join("alice")
    relay.join("bob")
    rid = new_id()
    assert relay.send(alice, "bob", "work", request_id=rid).code == 0
    elsewhere = {"RELAY_HOME": str(tmp_path / "not-this-one")}
    r = relay("--home", relay.home, "list", "--json", env=elsewhere)
    assert r.code == 0, r.err
    assert [q["id"] for q in r.json["requests"]] == [rid]
    r = relay(f"--home={relay.home}", "list", "--json", env=elsewhere)
    assert r.code == 0 and [q["id"] for q in r.json["requests"]] == [rid]
    # the command's own --home wins over the root's
    r = relay("--home", tmp_path / "missing", "list", "--json", "--home", relay.home)
    assert r.code == 0 and [q["id"] for q in r.json["requests"]] == [rid]
    r = relay("--home", relay.home, "show", rid, env=elsewhere)
    assert r.code == 0 and rid in r.out, r.err
    assert not (tmp_path / "not-this-one").exists()


@pytest.mark.sqlite_only
def test_a_command_printed_under_a_root_home_carries_it(relay, tmp_path):
    relay.join("bob")
    r = relay(
        "--home",
        relay.home,
        "prepare",
        "--to",
        "bob",
        "--as",
        "alice",
        "later",
        env={"RELAY_HOME": None},
    )
    assert r.code == 0, r.err
    nxt = next(ln for ln in r.out.splitlines() if ln.startswith("next: relay submit "))
    assert nxt.endswith(f" --home {relay.home}"), nxt
