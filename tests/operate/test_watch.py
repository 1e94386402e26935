"""`relay watch`: plain snapshot without a terminal, live view in a real terminal (tmux)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Tmux, new_id

BOX_CHARS = re.compile("[\u2500-\u257f]")


def busy_home(relay) -> dict[str, str]:
    """Peers, a queued, a delivered and an acknowledged request, one delivery_unknown."""
    alice, bob = relay.join("alice", "--kind", "claude"), relay.join("bob", "--kind", "codex")
    relay("peers", "add", "carol", "--kind", "human")
    queued, delivered, acked, lost = new_id(), new_id(), new_id(), new_id()
    relay.send(alice, "bob", "do a", request_id=acked)
    relay.send(alice, "bob", "do b", request_id=delivered)
    relay.send(alice, "bob", "do c", request_id=lost)
    relay.send(bob, "alice", "do d", request_id=queued)
    relay("claim", "--id", acked, env=bob)
    relay("ack", acked, env=bob)
    relay("claim", "--id", delivered, env=bob)
    relay("claim", "--id", lost, "--lease", "10s", env=bob)
    return {"queued": queued, "delivered": delivered, "acked": acked, "lost": lost}


# ------------------------------------------------------------------ snapshot mode
def test_without_a_terminal_prints_one_plain_snapshot(relay):
    ids = busy_home(relay)
    r = relay("watch", env={"RELAY_TIME_OFFSET": "11"})  # the 10 s claim lease of `lost` passed
    assert r.code == 0 and r.err == ""
    out = r.out
    assert "\x1b" not in out and not BOX_CHARS.search(out)
    lines = out.splitlines()
    assert lines[0] == "relay watch: 1 delivery_unknown, 3 open"
    assert "open requests (3: 1 queued, 1 delivered, 1 acknowledged)" in out
    assert "peers (3, 2 active)" in out and "recent transitions" in out
    peers = {
        ln.split()[0]: ln.split()
        for ln in lines
        if ln.startswith("  ") and ln.split()[0] in ("alice", "bob", "carol")
    }
    assert peers["alice"][1:3] == ["claude", "yes"] and peers["bob"][1] == "codex"
    assert peers["carol"][1:4] == ["human", "no", "-"]
    assert "not_configured" in peers["alice"]
    for key in ("queued", "delivered", "acked"):
        assert ids[key][:8] in out
    # a delivered request's claim lease, with its clock time, under "deadline"
    delivered = next(ln for ln in lines if ln.lstrip().startswith(ids["delivered"][:8]))
    assert re.search(r"delivered .* in \d+m \(\d\d:\d\d\)$", delivered), delivered
    # The lapsed claim became delivery_unknown: it needs a person, so it comes first.
    sections = [ln for ln in lines if ln and not ln.startswith(" ")]
    assert sections[1].startswith("delivery_unknown (1): check whether it was done")
    assert sections[2].startswith("open requests")
    assert ids["lost"][:8] in out.split("open requests")[0]
    assert "!! delivery_unknown" in out and "claim_lease_expired" in out


def test_many_open_requests_show_the_oldest_and_count_the_rest(relay, monkeypatch):
    from relay_cli.operate import watch

    monkeypatch.setattr(watch, "OPEN_LIMIT", 2)
    alice = relay.join("alice")
    relay("peers", "add", "bob")
    ids = [new_id() for _ in range(3)]
    for rid in ids:
        relay.send(alice, "bob", request_id=rid)
    out = relay("watch").out
    assert "open requests (3: 3 queued" in out and ", 3 open" in out
    opened = out.split("peers (")[0]
    assert ids[0][:8] in opened and ids[1][:8] in opened and ids[2][:8] not in opened
    assert "+1 more: relay list --state queued --state delivered --state acknowledged" in out


def test_held_requests_are_chosen_from_every_open_request_not_the_newest(relay):
    """Before: watch read the 40 newest open requests and then put the held ones first:
    with two held requests older than 40 queued ones, what a person watches for (work
    delivered or acknowledged) vanished. Held work first, then the oldest queued, chosen
    from all of them."""
    from relay_cli.operate import watch

    alice = relay.join("alice", "--lease", "24h")
    bob = relay.join("bob", "--lease", "24h")
    held = [new_id(), new_id()]
    for rid in held:
        relay.send(alice, "bob", "held", request_id=rid)
        relay("claim", "--id", rid, "--lease", "1h", env=bob)
    relay("ack", held[1], env=bob)
    queued = [new_id() for _ in range(watch.OPEN_LIMIT + 2)]
    for i, rid in enumerate(queued):
        assert relay.send(alice, "bob", f"later {i}", request_id=rid).code == 0
    doc = relay("watch", "--json").json
    assert [r["id"] for r in doc["open"]["acknowledged"]] == [held[1]]
    assert [r["id"] for r in doc["open"]["delivered"]] == [held[0]]
    assert [r["id"] for r in doc["open"]["queued"]] == queued[: watch.OPEN_LIMIT - 2]
    assert doc["open_more"] == 4
    opened = relay("watch").out.split("peers (")[0]
    assert held[0][:8] in opened and held[1][:8] in opened


def test_watch_is_read_only(relay):
    busy_home(relay)
    before = relay.snapshot()
    assert relay("watch").code == 0
    assert relay("watch", "--json").code == 0
    assert relay.snapshot() == before


def test_json_snapshot(relay):
    ids = busy_home(relay)
    doc = relay("watch", "--json").json
    assert [p["name"] for p in doc["peers"]] == ["alice", "bob", "carol"]
    assert [r["id"] for r in doc["open"]["queued"]] == [ids["queued"]]
    assert doc["events"][0]["to_state"] == "delivered" and doc["counts"]["queued"] == 1


def test_failed_transitions_stand_out(relay):
    alice, bob = relay.join("alice"), relay.join("bob")
    rid = new_id()
    relay.send(alice, "bob", request_id=rid)
    relay("claim", env=bob)
    relay("fail", rid, "--reason", "tests are red", env=bob)
    out = relay("watch").out
    assert "!! failed" in out and "failed_by_recipient" in out
    assert "tests are red" not in out  # peer text (details) stays out of the overview


def test_ledger_entries_awaiting_approval_are_shown_inert(relay, tmp_path):
    r = relay.proc(
        "once",
        "--approve",
        "--timeout",
        "0",
        "--key",
        "deploy-1",
        "--",
        "echo",
        "[red]boom[/red]",
        "\x1b]0;pwned\x07",
    )
    assert r.code == 75, r.err
    out = relay("watch").out
    assert "awaiting approval (1)" in out and "deploy-1" in out
    assert out.splitlines()[0] == "relay watch: 1 awaiting approval, 0 open"  # counted too
    assert "[red]boom[/red]" in out and "\\x1b]0;pwned\\x07" in out
    assert "\x1b" not in out and "\x07" not in out


def test_ledger_commands_are_shown_quoted_as_a_shell_would_take_them(relay):
    r = relay.proc(
        "once", "--approve", "--timeout", "0", "--key", "rm-1", "--", "rm", "-rf", "my dir", "it's"
    )
    assert r.code == 75, r.err
    out = relay("watch").out
    assert "rm -rf 'my dir' 'it'\"'\"'s'" in out  # shlex.join: what would actually run
    assert "rm -rf my dir it's" not in out
    doc = relay("watch", "--json").json  # JSON keeps the argv list itself
    assert ["rm", "-rf", "my dir", "it's"] in [e["argv"] for e in doc["awaiting_approval"]]


# ------------------------------------------------------------ a real terminal (tmux)
needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


@pytest.fixture
def term(relay, tmp_path):
    t = None

    def start(**extra: str) -> Tmux:
        nonlocal t
        t = Tmux(relay, "watch", env=extra, cwd=tmp_path)
        return t

    yield start
    if t is not None:
        t.kill()


@needs_tmux
def test_live_view_shows_a_send_from_another_process_and_q_leaves(relay, term, tmp_path):
    alice = relay.join("alice")
    relay.join("bob")
    t = term()
    t.wait_for("open requests (0")
    screen = t.pane()
    assert "alice" in screen and "bob" in screen and "lease left" in screen
    rid = new_id()
    sent = relay.proc("send", "--to", "bob", "--id", rid, "-", input="hello", env=alice)
    assert sent.code == 0, sent.err
    # how soon is measured by `python -m bench watch` (a timed assertion has no place here)
    t.wait_for("open requests (1: 1 queued")
    assert rid[:8] in t.pane()
    t.keys("q")
    t.wait_for("EXITED rc=0", timeout=5)
    assert (tmp_path / "stty.before").read_text() == (tmp_path / "stty.after").read_text()


@needs_tmux
def test_live_view_leaves_on_ctrl_c_and_restores_the_terminal(relay, term, tmp_path):
    relay.join("alice")
    t = term()
    t.wait_for("recent transitions")
    t.keys("C-c")
    t.wait_for("EXITED rc=0", timeout=5)
    assert (tmp_path / "stty.before").read_text() == (tmp_path / "stty.after").read_text()


@needs_tmux
def test_live_view_under_no_color_draws_no_box_characters(relay, term):
    relay.join("alice")
    t = term(NO_COLOR="1")
    t.wait_for("recent transitions")
    screen = t.tmux("capture-pane", "-p", "-e", "-t", "w")
    assert "alice" in screen and not BOX_CHARS.search(screen)
    assert not re.search(r"\x1b\[[0-9;]*3[0-9]", screen.replace("\x1b[39m", ""))  # no colours
    t.keys("q")
    t.wait_for("EXITED rc=0", timeout=5)


@needs_tmux
def test_live_view_leaves_on_sigterm_and_restores_the_terminal(relay, term, tmp_path):
    relay.join("alice")
    t = term()
    t.wait_for("recent transitions")
    shell = int(t.tmux("list-panes", "-t", "w", "-F", "#{pane_pid}").strip())
    (watcher,) = [
        int(p)
        for p in subprocess.run(
            ["pgrep", "-P", str(shell)], capture_output=True, text=True
        ).stdout.split()
    ]
    os.kill(watcher, 15)
    t.wait_for("EXITED rc=0", timeout=5)
    assert (tmp_path / "stty.before").read_text() == (tmp_path / "stty.after").read_text()


@needs_tmux
def test_live_view_shows_peer_text_inert(relay, term):
    r = relay.proc(
        "once",
        "--approve",
        "--timeout",
        "0",
        "--key",
        "k1",
        "--",
        "echo",
        "[reverse]markup[/reverse]",
        "\x1b[2J\x1b[31mred",
    )
    assert r.code == 75, r.err
    t = term()
    t.wait_for("awaiting approval (1")
    screen = t.pane()
    assert "[reverse]markup[/reverse]" in screen and "\\x1b[2J\\x1b[31mred" in screen
    t.keys("q")
    t.wait_for("EXITED rc=0", timeout=5)


def test_watch_json_is_one_document(relay):
    relay.join("alice")
    r = relay("watch", "--json")
    assert r.code == 0 and json.loads(r.out)["peers"][0]["name"] == "alice"
    assert os.linesep not in r.out.rstrip("\n")


def test_watch_json_carries_the_standard_request_and_entry_objects(relay):
    ids = busy_home(relay)
    r = relay.proc("once", "--approve", "--timeout", "0", "--key", "deploy-1", "--", "true")
    assert r.code == 75, r.err
    doc = relay("watch", "--json", env={"RELAY_TIME_OFFSET": "11"}).json
    shown = relay("show", ids["queued"], "--json").json
    (queued,) = doc["open"]["queued"]
    assert queued == {k: v for k, v in shown.items() if k not in ("text", "reply")}
    (lost,) = doc["delivery_unknown"]
    assert lost["id"] == ids["lost"] and lost["reason"] == "claim_lease_expired"
    assert set(lost) == set(queued)  # every key of the request object, always present
    (waiting,) = doc["awaiting_approval"]
    listed = relay("ledger", "list", "--json").json["entries"]
    assert waiting == next(e for e in listed if e["key"] == "deploy-1")
    assert set(doc["events"][0]) == {
        "at",
        "from_state",
        "to_state",
        "reason",
        "actor",
        "detail",
        "request_id",
    }
    assert doc["counts"]["delivery_unknown"] == 1 and doc["open_more"] == 0


def snapshot(relay):
    """watch's snapshot of the home, read as `relay watch` reads it."""
    from relay_cli.operate import watch
    from relay_cli.requests import due

    store = relay.open_store()
    try:
        with due.unit(store, write=False) as now:
            return watch.gather(store, now)
    finally:
        store.close()


def test_the_view_fits_any_screen_and_counts_what_it_leaves_out(relay):
    from relay_cli.operate import watch

    busy_home(relay)
    snap = snapshot(relay)
    for width in (10, 24, 40, 80, 200):
        for height in range(1, 45):
            lines = watch.render(snap, width, height, footer="q or Ctrl-C: leave")
            assert len(lines) <= height and all(ln.cell_len <= width for ln in lines)
            text = "\n".join(ln.plain for ln in lines)
            assert lines[0].plain.startswith("relay watch"[: width - 1])
            if width == 80 and 2 < height < 16:  # not all of it fits: what is left is counted
                assert "+" in text, (height, text)


def test_every_command_the_view_names_for_a_person_runs_as_written(relay):
    """design.md §14: a command a screen tells a person to run works as shown (placeholders
    aside). `relay resolve ID` without --outcome is a usage_error, so is
    `relay ledger resolve KEY`; the view names them whole, on screen at 80 columns too."""
    from relay_cli.operate import watch

    busy_home(relay)
    r = relay.proc("once", "--approve", "--timeout", "0", "--key", "deploy-1", "--", "true")
    assert r.code == 75, r.err
    assert relay("sweep", env={"RELAY_TIME_OFFSET": "11"}).code == 0  # `lost` lapsed
    snap = snapshot(relay)
    assert snap.unknown
    snap.effect_unknown = [
        {"key": "k1", "argv": ["gh", "pr", "create"], "cwd": "/w", "updated_at": None}
    ]
    for text in (
        "\n".join(watch.render(snap)),
        "\n".join(ln.plain for ln in watch.render(snap, 80, 40)),
    ):
        # the first row's commands, whole, one per choice: no placeholder, no `a|b|c`
        first = watch.unique_prefixes(
            [r["id"] for r in snap.unknown + snap.open] + [e["request_id"] for e in snap.events]
        )
        for outcome in ("completed", "failed", "requeue"):
            assert f"relay resolve {first[snap.unknown[0]['id']]} --outcome {outcome}" in text
        for outcome in ("succeeded", "failed", "forget"):
            assert f"relay ledger resolve k1 --outcome {outcome}" in text, text
        assert "|" not in text and not re.search(r"relay (ledger )?resolve (ID|KEY)", text)


def _hook(relay, env: dict, name: str, sid: str) -> None:
    doc = json.loads(
        (Path(__file__).parents[1] / "fixtures" / "claude" / f"{name}.json").read_text()
    )
    r = relay("hook", "claude", input=json.dumps({**doc, "session_id": sid}), env=env)
    assert (r.code, r.out) == (0, ""), r


def test_the_bell_rings_once_for_each_agent_that_newly_needs_a_person(relay):
    """design.md §19: none for what is on the screen when watch starts; one for each new
    "needs you" item; none again for the same wait.

    After each step the test adds a person (``mark-N``, who never needs anyone) and reads
    until watch shows them: that screen comes from a snapshot taken after the step, and
    watch rings for a snapshot before it draws it, so every bell the step could cause has
    been read by then (no fixed wait, however slow the machine)."""
    import pty
    import select
    import time

    agent = relay.join("claude-1", "--kind", "claude", "--lease", "1h")
    env = {**agent, "CLAUDE_ENV_FILE": ""}
    sid = "bell-session"
    _hook(relay, env, "user_prompt_submit", sid)
    _hook(relay, env, "permission_request", sid)  # waiting before watch starts: no bell
    pid, fd = pty.fork()
    if pid == 0:  # the child: `relay watch` on a terminal
        e = relay._env({"TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30"})
        os.execve(sys.executable, [sys.executable, "-m", "relay_cli", "watch"], e)
    seen = b""
    marks = 0

    def read_until(wanted: bytes, timeout: float = 30) -> bytes:
        """What watch writes until ``wanted`` is among it (or it ends)."""
        nonlocal seen
        end, got = time.monotonic() + timeout, b""
        while wanted not in got and time.monotonic() < end:
            if select.select([fd], [], [], 0.1)[0]:
                try:
                    got += os.read(fd, 65536)
                except OSError:  # watch ended and its terminal closed
                    break
        seen += got
        assert wanted in got, (wanted, seen[-2000:])
        return got

    def after_a_snapshot() -> bytes:
        """What watch writes until it draws a snapshot taken after now."""
        nonlocal marks
        marks += 1
        relay("peers", "add", f"mark-{marks}", "--kind", "human")
        return read_until(f"mark-{marks} ".encode())

    def bells(data: bytes) -> int:  # a BEL that ends an OSC sequence rings nothing
        return re.sub(rb"\x1b\][^\x07\x1b]*(\x07|\x1b\\)", b"", data).count(b"\x07")

    try:
        read_until(b"needs you")
        after_a_snapshot()
        assert bells(seen) == 0
        other = relay.join("codex-1", "--kind", "codex", "--lease", "1h")
        doc = json.loads(
            (Path(__file__).parents[1] / "fixtures/codex/permission_request.json").read_text()
        )
        r = relay("hook", "codex", input=json.dumps(doc), env=other)
        assert (r.code, r.out) == (0, "")
        assert bells(after_a_snapshot()) == 1
        _hook(relay, env, "notification_permission", sid)  # the same wait
        assert bells(after_a_snapshot()) == 0
        _hook(relay, env, "post_tool_use", sid)
        _hook(relay, env, "permission_request", sid)  # a new wait of claude-1
        assert bells(after_a_snapshot()) == 1
        assert bells(after_a_snapshot()) == 0  # rung once, not again at the next screen
        os.write(fd, b"q")
        try:
            while select.select([fd], [], [], 30)[0] and os.read(fd, 65536):
                pass
        except OSError:  # watch left and closed its terminal
            pass
    finally:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
        os.waitpid(pid, 0)
        os.close(fd)
