"""An environment problem is a typed error, never internal_error (design.md §7): closed
standard streams, a working directory whose name is not UTF-8."""

from __future__ import annotations

from conftest import new_id


def _closed(relay, shell_redirect: str, *args: str, stdin: bytes | None = None):
    """Run the real relay under sh with one of its standard streams closed."""
    import shlex
    import subprocess
    import sys

    cmd = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "relay_cli", *args))
    return subprocess.run(
        ["sh", "-c", f"{cmd} {shell_redirect}"],
        input=stdin,
        capture_output=True,
        env=relay._env(None),
        timeout=60,
    )


def test_a_closed_stdout_is_refused_before_anything_is_done(relay):
    alice = relay.join("alice", "--lease", "1h")
    relay.join("bob", "--lease", "1h")
    before = relay.snapshot()
    rid = new_id()
    relay.env.update(alice)
    p = _closed(relay, ">&-", "send", "--to", "bob", "--id", rid, "--json", "hi")
    assert p.returncode == 2, p.stderr
    import json

    err = json.loads(p.stderr.decode().strip())["error"]
    assert err["code"] == "usage_error" and "standard output is closed" in err["message"]
    assert relay.snapshot() == before  # the send did not commit and then fail
    for args in (("list",), ("list", "--json"), ("peers", "list")):
        q = _closed(relay, ">&-", *args)
        assert q.returncode == 2 and b"internal_error" not in q.stderr


def test_a_closed_stdin_or_stderr_is_not_an_internal_error(relay):
    alice = relay.join("alice", "--lease", "1h")
    relay.join("bob", "--lease", "1h")
    relay.env.update(alice)
    before = relay.snapshot()
    p = _closed(relay, "<&-", "send", "--to", "bob", "--id", new_id(), "--json", "-")
    assert p.returncode == 2 and b"standard input is closed" in p.stderr
    assert b"internal_error" not in p.stderr
    assert relay.snapshot() == before
    q = _closed(relay, "2>&-", "send", "--to", "bob", "--id", new_id(), "hi")
    assert q.returncode == 0  # stderr only carried a note
    assert _closed(relay, "<&-", "list", "--json").returncode == 0
    hook = _closed(relay, ">&- </dev/null", "hook", "claude")
    assert hook.returncode == 0  # a hook never breaks its agent


def test_once_in_a_working_directory_whose_name_is_not_utf8_is_a_usage_error(relay, tmp_path):
    import json
    import os
    import subprocess
    import sys

    odd = os.path.join(os.fsencode(tmp_path), b"dir-\xff")
    os.mkdir(odd)
    relay.make_home()
    before = relay.snapshot()
    p = subprocess.run(
        [sys.executable, "-m", "relay_cli", "once", "--key", "k", "--json", "--", "true"],
        cwd=odd,
        capture_output=True,
        env=relay._env(None),
        timeout=60,
    )
    assert p.returncode == 2, p.stderr
    err = json.loads(p.stderr.decode().strip())["error"]
    assert err["code"] == "usage_error" and "not a UTF-8 path" in err["message"]
    assert relay.snapshot() == before
