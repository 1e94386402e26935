"""A home that does not exist is not made by a read, and every not-found error names the home
or database it searched (design.md §2, §7)."""

from __future__ import annotations

import shlex

import pytest

RID = "0b6c1f9e-6d2a-4c1e-9f3b-2a7d8e5c4b10"


def printed(url: str) -> str:
    """The URL as relay prints it (design.md §13): rebuilt from libpq's reading."""
    from relay_cli.store.url import read

    shown = read(url).url
    assert shown is not None, url
    return shown


# Commands that only read, or act on something that must already exist: on a missing home
# they say so and make nothing (design.md §2 lists them).
READS = [
    ("list",),
    ("show", RID),
    ("wait", RID, "--timeout", "0"),
    ("inbox", "--as", "bob"),
    ("notices", "--as", "bob"),
    ("peers", "list"),
    ("peers", "heartbeat", "--as", "bob"),
    ("peers", "leave", "--as", "bob"),
    ("ledger", "list"),
    ("ledger", "show", "some-key"),
    ("ledger", "resolve", "some-key", "--outcome", "forget"),
    ("watch",),
    ("export",),
    ("cancel", RID, "--as", "bob"),
    ("claim", "--as", "bob"),
    ("ack", RID, "--as", "bob"),
    ("reply", RID, "done", "--as", "bob"),
    ("fail", RID, "--reason", "x", "--as", "bob"),
    ("reject", RID, "--reason", "x", "--as", "bob"),
    ("submit", RID, "--as", "bob"),
    ("sweep",),
    ("prune",),
    # a session token names a session that lives in a home: a mistyped home would be made
    # and the token blamed as invalid_session (design.md §2)
    ("send", "--to", "bob", "--as", "alice", "--session", "tok", "hi"),
    ("prepare", "--to", "bob", "--as", "alice", "--session", "tok", "hi"),
]


@pytest.mark.sqlite_only
@pytest.mark.parametrize("argv", READS, ids=lambda a: " ".join(a[:2]))
def test_a_read_on_a_missing_home_says_so_and_creates_nothing(relay, tmp_path, argv):
    missing = tmp_path / "typo" / "relay-hmoe"
    r = relay(*argv, "--json", "--home", str(missing))
    assert (r.code, r.error["code"]) == (7, "storage_error"), r.err
    assert f"no relay home exists at {missing}" in r.error["message"]
    assert "--home or RELAY_HOME" in r.error["hint"]
    assert not (tmp_path / "typo").exists()


@pytest.mark.sqlite_only
def test_list_through_a_mistyped_relay_home_is_not_no_requests(relay, tmp_path):
    missing = tmp_path / "relay-hmoe"
    r = relay("list", env={"RELAY_HOME": str(missing)})
    assert r.code == 7 and "no requests" not in r.out.lower()
    assert f"no relay home exists at {missing}" in r.err
    assert not missing.exists()


@pytest.mark.sqlite_only
def test_a_read_on_a_directory_without_relay_db_creates_no_database(relay, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir(mode=0o700)
    r = relay("list", "--json", "--home", str(empty))
    assert (r.code, r.error["code"]) == (7, "storage_error"), r.err
    assert "holds no relay database" in r.error["message"]
    assert list(empty.iterdir()) == []


@pytest.mark.sqlite_only
@pytest.mark.parametrize("verb", ["send", "prepare"])
def test_a_session_token_from_the_environment_makes_no_home_either(relay, tmp_path, verb):
    missing = tmp_path / "relay-hmoe"
    who = {"RELAY_PEER": "alice", "RELAY_SESSION": "tok", "RELAY_HOME": str(missing)}
    r = relay(verb, "--to", "bob", "hi", "--json", env=who)
    assert (r.code, r.error["code"]) == (7, "storage_error"), r.err
    assert f"no relay home exists at {missing}" in r.error["message"]
    assert not missing.exists()


@pytest.mark.sqlite_only
@pytest.mark.parametrize("verb", ["send", "prepare"])
def test_a_name_without_a_session_starts_from_nothing_and_makes_the_home(relay, tmp_path, verb):
    home = tmp_path / "fresh"
    r = relay(verb, "--to", "bob", "--as", "ops", "hi", "--json", "--home", str(home))
    assert r.error["code"] == "unknown_peer"  # bob is not known there yet
    assert (home / "relay.db").exists()


@pytest.mark.sqlite_only
def test_writes_still_make_the_home_and_db_path_still_names_it(relay, tmp_path):
    home = tmp_path / "fresh"
    r = relay("db", "path", "--json", "--home", str(home))
    assert r.code == 0 and r.json["exists"] is False and not home.exists()
    assert relay("peers", "add", "bob", "--home", str(home)).code == 0
    assert relay("list", "--json", "--home", str(home)).json["requests"] == []


def test_not_found_errors_name_the_home_or_database_searched(relay):
    relay("peers", "add", "bob")
    where = "the relay home " + str(relay.home)
    if relay.url:
        where = f"the database {printed(relay.url)}"
    for argv, code in (
        (("show", RID), "request_not_found"),
        (("submit", RID, "--as", "bob"), "prepared_not_found"),
        (("ledger", "show", "no-such-key"), "ledger_key_not_found"),
        (("send", "--to", "nobody", "--as", "bob", "hi"), "unknown_peer"),
    ):
        r = relay(*argv, "--json")
        assert r.error["code"] == code, r.err
        assert r.error["message"].endswith(f"(looked in {where})"), r.error["message"]


# ---------------------------------------------------------------- hints name the home
def test_watch_s_commands_carry_the_home_it_watches(seeded, tmp_path):
    """Pasted into the same shell, every command `watch` prints acts on the home watched,
    as doctor's do (design.md §14): `relay --home X watch` then `relay list …` would
    otherwise look at the default home. The scope is the command line's: a home or
    database from the environment stays there."""
    relay, alice, bob, rid = seeded
    assert relay("claim", env=bob).code == 0
    assert relay("peers", "leave", env=bob).code == 0  # now delivery_unknown
    r = relay("watch")
    assert "relay " in r.out and "--home" not in r.out and "--database-url" not in r.out
    if relay.url:
        r = relay("watch", "--database-url", relay.url, env={"RELAY_DATABASE_URL": None})
        scope = f"--database-url {shlex.quote(printed(relay.url))}"
    else:
        r = relay("watch", "--home", str(relay.home), env={"RELAY_HOME": None})
        scope = f"--home {relay.home}"
    lines = [ln for ln in r.out.splitlines() if "relay " in ln and "relay watch:" not in ln]
    assert lines, r.out
    for ln in lines:
        for command in ln.split("relay ")[1:]:
            assert scope in command, (ln, r.out)


@pytest.mark.sqlite_only
def test_unsafe_state_dir_names_the_commands_for_the_home_given(relay, tmp_path):
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    r = relay("list", "--json", "--home", str(loose))
    assert r.error["code"] == "unsafe_state_dir"
    assert f"`relay doctor --home {loose}`" in r.error["hint"]
    # a directory relay did not make (no relay.db): --fix is never named for it
    assert "--fix --home" not in r.error["hint"] and "relay did not make" in r.error["hint"]
    relay.join("alice")  # a home relay made, given by --home
    relay.home.chmod(0o755)
    r = relay("list", "--json", "--home", str(relay.home), env={"RELAY_HOME": None})
    assert f"`relay doctor --fix --home {relay.home}`" in r.error["hint"]


def test_prepare_and_claim_next_lines_carry_the_home(world):
    relay, alice, bob = world
    # the scope from the environment stays there (design.md §14)
    p = relay("prepare", "--to", "bob", "x", env=alice)
    assert "--home" not in p.out and "--database-url" not in p.out
    # the command line's is carried
    if relay.url:
        given = ("--database-url", relay.url)
        scope, unset = f"--database-url {shlex.quote(printed(relay.url))}", "RELAY_DATABASE_URL"
    else:
        given = ("--home", str(relay.home))
        scope, unset = f"--home {relay.home}", "RELAY_HOME"
    alice, bob = {**alice, unset: None}, {**bob, unset: None}
    p = relay("prepare", "--to", "bob", "x", *given, env=alice)
    assert "next: relay submit " in p.out and scope in p.out.split("next:")[1], p.out
    rid = p.out.split("next: relay submit ")[1].split()[0]
    assert relay("submit", rid, *given, env=alice).code == 0
    c = relay("claim", *given, env=bob)
    for lead in ("next: relay ack", "then: relay reply"):
        line = next(ln for ln in c.out.splitlines() if ln.startswith(lead))
        assert scope in line, c.out


# ---------------------------------------------------------------- usage_error's hint
@pytest.mark.parametrize(
    "argv",
    [
        ("send", "--to", "bob", "--as", "alice", "--file", "no-such-file.txt"),
        ("send", "--to", "bob", "--as", "alice", "--nope"),
        ("send", "--as", "alice", "hi"),
    ],
    ids=["missing file", "unknown option", "missing option"],
)
def test_the_usage_error_hint_fits_every_cause(relay, argv):
    """A missing --file is not a malformed command line: the fixed hint says what is true of
    every usage_error, and the message names the cause (design.md §7)."""
    r = relay(*argv, "--json")
    assert r.error["code"] == "usage_error", r.err
    assert "malformed" not in r.error["hint"]
    assert "the message names what is wrong" in r.error["hint"]
    if "--file" in argv:
        assert "no-such-file.txt" in r.error["message"]


@pytest.mark.sqlite_only
@pytest.mark.parametrize("term", ["xterm-256color", "dumb"])
def test_watch_on_a_terminal_waits_for_a_missing_home_to_be_made(relay, tmp_path, term):
    """`relay watch` started before the first agent joins says there is no home yet, makes
    none, and shows the home once a command that writes makes it."""
    import fcntl
    import os
    import pty
    import select
    import struct
    import sys
    import termios
    import time

    from conftest import plain

    home = tmp_path / "later"
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.environ["TERM"] = term
        os.execv(sys.executable, [sys.executable, "-m", "relay_cli", "watch", "--home", str(home)])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    out, start, made = b"", time.monotonic(), False
    while time.monotonic() - start < 8:
        if select.select([fd], [], [], 0.2)[0]:
            try:
                out += os.read(fd, 65536)
            except OSError:
                break
        if not made and b"no relay home exists" in out:
            assert not home.exists()
            assert relay("peers", "add", "zed", "--home", str(home)).code == 0
            made = True
        if made and b"zed" in out:
            break
    os.write(fd, b"q")
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    text = plain(out.decode("utf-8", "replace"))
    assert made and "zed" in text, text
    assert text.count("no relay home exists") <= 3, text  # said, not repeated every tick
    assert os.waitstatus_to_exitcode(status) == 0


def test_the_join_line_of_an_identity_error_joins_in_the_same_home(relay):
    """After lease_expired the hint's exact `eval "$(relay peers join …)"` line carries the
    home (or database) the call was given, so pasted it joins there, not in the default."""
    alice = relay.join("alice", "--lease", "10s")
    if relay.url:  # given by option, not by the environment a pasted line inherits
        given = ["--database-url", relay.url]
        scope = f"--database-url {shlex.quote(printed(relay.url))}"
        env = {"RELAY_DATABASE_URL": None}
    else:
        given, scope = ["--home", str(relay.home)], f"--home {relay.home}"
        env = {"RELAY_HOME": None}
    r = relay(
        "peers", "heartbeat", "--json", *given, env={**alice, **env, "RELAY_TIME_OFFSET": "60"}
    )
    assert r.error["code"] == "lease_expired", r.err
    assert f"--shell {scope})" in r.error["hint"], r.error["hint"]
    # with the home from the environment, the pasted line inherits it: no option added
    r = relay("peers", "heartbeat", "--json", env={**alice, "RELAY_TIME_OFFSET": "60"})
    assert "--shell)" in r.error["hint"], r.error["hint"]
