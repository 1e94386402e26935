"""A database URL given on the command line with a password: relay never prints the
password, so the commands it prints read the URL from $RELAY_DATABASE_URL, and every
screen that prints one says so, once (design.md §14)."""

from __future__ import annotations

import pytest


@pytest.mark.postgres_only
def test_commands_under_a_url_with_a_password_read_it_from_the_environment(relay):
    relay.join("bob")
    secret = "Hunter2Secret"
    url = f"{relay.url}{'&' if '?' in relay.url else '?'}password={secret}"
    env = {"RELAY_DATABASE_URL": None, "PGPASSFILE": "/nonexistent"}
    r = relay("prepare", "--to", "bob", "--as", "alice", "later", "--database-url", url, env=env)
    assert r.code == 0, r.err
    assert secret not in r.out + r.err
    nxt = next(ln for ln in r.out.splitlines() if ln.startswith("next: relay submit "))
    assert nxt.endswith('--database-url "${RELAY_DATABASE_URL:?export the database URL first}"')
    assert r.err.count("carries a password") == 1, r.err
    # the same URL from the environment stays there: no flag, nothing to say
    r = relay("prepare", "--to", "bob", "--as", "alice", "later", env={"RELAY_DATABASE_URL": url})
    assert r.code == 0 and "--database-url" not in r.out and "password" not in r.err
