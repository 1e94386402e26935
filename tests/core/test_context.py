"""Each call works with one context, built once by the command line and handed down
(design.md §8): its clock, its database URL; nothing of one call is left in the process
for the next."""

from __future__ import annotations

from relay_cli.core.clock import Clock, iso


def test_a_call_handed_a_fake_clock_keeps_relays_time_by_it(relay):
    alice, _ = relay.join("alice"), relay.join("bob")
    frozen = Clock().now_ms() + 20_000  # a stopped clock, 20 s ahead (within the lease)
    r = relay(
        "send",
        "--to",
        "bob",
        "--json",
        "-",
        input="hi",
        env=alice,
        clock=Clock(source=lambda: frozen, fixed=True),
    )
    assert r.code == 0, r.err
    assert r.json["created_at"] == iso(frozen)
    # the next call, handed nothing, is back on the real clock
    assert relay("send", "--to", "bob", "--json", "-", input="hi", env=alice).json[
        "created_at"
    ] < iso(frozen)


def test_an_offset_clock_moves_time_as_relay_time_offset_does(relay):
    alice, _ = relay.join("alice"), relay.join("bob")
    rid = relay.send(alice, "bob", "hi", "--ttl", "60s").json["id"]
    r = relay("show", rid, "--json", env=alice, clock=Clock("61"))
    assert r.json["state"] == "expired"


def test_a_database_url_given_to_one_call_is_not_used_by_the_next(relay):
    assert relay("sweep").code == 0  # the home exists (a read makes none)
    r = relay("list", "--json", "--database-url", "mysql://nowhere/x")
    assert r.code == 2 and r.error["code"] == "usage_error"
    assert relay("list", "--json").code == 0


def test_a_store_carries_the_clock_it_was_opened_with(relay):
    store = relay.open_store()
    try:
        store.clock = Clock("3600")
        assert abs(store.clock.now_ms() - Clock().now_ms() - 3_600_000) < 5_000
    finally:
        store.close()


def test_a_calls_colour_choice_wins_over_the_environment(monkeypatch):
    from relay_cli.core.output import Output

    monkeypatch.setenv("FORCE_COLOR", "1")
    assert Output().color and not Output(color_choice=False).color
    monkeypatch.delenv("FORCE_COLOR")
    monkeypatch.setenv("NO_COLOR", "1")
    assert not Output().color and Output(color_choice=True).color
    assert not Output(json_mode=True, color_choice=True).color
