"""`relay web` (design.md §17): a read-only view on 127.0.0.1 behind a token made for each
run, whose page shows watch's snapshot, live. The server runs as a real process here; the
page itself, in a real browser: test_web_browser.py."""

from __future__ import annotations

import http.client
import json
import os
import shlex
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import Relay, fake_crash, new_id
from test_watch import busy_home

from relay_cli.operate.web.server import HEADERS
from testsupport.browser import RelayWeb

HOSTILE = (
    "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"
    " \u202eevil\u202c \x1b[31mred\x1b[0m \x07 bell\u200b"
)
PATHS = ("/", "/app.js", "/app.css", "/icon.svg", "/snapshot", "/events", "/text", "/nothing-here")


@pytest.fixture
def home(tmp_path) -> Relay:
    """A relay home on SQLite, for what does not depend on where the requests are kept
    (the gate, the headers, the process): run once, not on both backends."""
    return Relay(tmp_path / "relay-home")


@contextmanager
def web(relay, *args: str, env: dict | None = None):
    """`relay web --no-open ARGS` for this test's home or database, stopped at the end."""
    served = RelayWeb(sys.executable, relay._env(env), *args)
    try:
        yield served
    finally:
        if served.proc.poll() is None:
            served.stop()


def ask(
    port: int, path: str, host: str | None = "127.0.0.1", method: str = "GET"
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP request to 127.0.0.1:``port`` with exactly this ``Host`` (None: none)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        if host is not None:
            conn.putheader("Host", f"{host}:{port}" if host and ":" not in host else host)
        conn.endheaders()
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def snapshot_doc(served: RelayWeb) -> dict:
    status, _, body = ask(served.port, served.at("/snapshot")[len(served.base) :])
    assert status == 200, body
    return json.loads(body)


def unscoped(commands: list[str]) -> list[str]:
    """The commands without the scope words they end with (test_the_commands_carry_...)."""
    return [c.split(" --home ")[0].split(" --database-url ")[0] for c in commands]


def busy_web_home(relay) -> dict[str, str]:
    """watch's busy home (a queued, a delivered and an acknowledged request, one claim
    that lapses into delivery_unknown 10 s later), with a completed request, one entry
    awaiting approval and one effect_unknown entry; relay's clock moved past the lapse."""
    ids = busy_home(relay)
    dave, erin = relay.join("dave"), relay.join("erin")
    done = new_id()
    assert relay.send(dave, "erin", "do e", request_id=done).code == 0
    assert relay("claim", "--id", done, env=erin).code == 0
    assert relay("reply", done, "-", input="done", env=erin).code == 0
    r = relay.proc("once", "--approve", "--timeout", "0", "--key", "deploy-1", "--", "true")
    assert r.code == 75, r.err
    assert relay.proc("once", "--key", "migrate-1", "--", "true").code == 0
    fake_crash(relay, "migrate-1")
    relay.move_clock(11)  # the 10 s claim lease of `lost` passed
    return {**ids, "done": done}


# ------------------------------------------------------------------ the address and gate
def test_first_line_is_its_address_on_loopback_with_a_token_made_for_this_run(home):
    home.join("alice")
    with web(home) as one, web(home) as two:
        for served in (one, two):
            assert served.first_line == f"http://127.0.0.1:{served.port}/?token={served.token}\n"
            assert len(served.token) >= 40 and served.token.isascii()
        assert one.token != two.token and one.port != two.port  # a free port each
        status, headers, body = ask(one.port, f"/?token={one.token}")
        assert status == 200 and headers["content-type"] == "text/html; charset=utf-8"
        assert b"<title>relay</title>" in body
        assert f"app.js?token={one.token}".encode() in body  # its assets need it too
        assert ask(one.port, f"/?token={two.token}")[0] == 403  # another run's is no key


def test_a_missing_or_wrong_token_and_a_foreign_host_are_refused_everywhere(home):
    home.join("alice")
    with web(home) as served:
        good = served.token
        for path in PATHS:
            for query in ("", "?token=", "?token=wrong", f"?token={good[:-1]}", f"?token={good}x"):
                assert ask(served.port, path + query)[0] == 403, (path, query)
            # the right token twice, or in another parameter, is no token either
            assert ask(served.port, f"{path}?token={good}&token={good}")[0] == 403
            assert ask(served.port, f"{path}?tok={good}")[0] == 403
            for host in (
                "rebind.test",  # a DNS name pointing at 127.0.0.1 (DNS rebinding)
                "127.0.0.1.nip.io",
                "evil.example:80",
                "localhost.evil.example",
                "127.0.0.2",
                "0.0.0.0",
                "",
                None,  # no Host at all
                "127.0.0.1:80:80",
                "127.0.0.1:x",
            ):
                assert ask(served.port, f"{path}?token={good}", host=host)[0] == 403, host
        # the loopback address by any of its names, on any port (an SSH tunnel's)
        for host in ("127.0.0.1", "localhost", "LOCALHOST:8080", "[::1]:8765", "[::1]"):
            assert ask(served.port, f"/?token={good}", host=host)[0] == 200, host
        status, headers, body = ask(served.port, "/snapshot?token=wrong")
        assert body == b"403 refused: this view needs the address relay web printed\n"
        assert good.encode() not in body


def test_it_listens_on_127_0_0_1_only(home):
    home.join("alice")
    with web(home) as served:
        for address in ("127.0.0.2", "127.1.2.3"):  # loopback too, but not its address
            with pytest.raises(OSError):
                socket.create_connection((address, served.port), timeout=2).close()
        listening = Path("/proc/net/tcp").read_text()
        port = f":{served.port:04X} "
        locals_ = [ln.split()[1] for ln in listening.splitlines()[1:] if port in ln + " "]
        assert locals_ and all(a == f"0100007F:{served.port:04X}" for a in locals_)


def test_every_answer_carries_the_strict_policy_and_is_never_cached(home):
    home.join("alice")
    with web(home) as served:
        for path in PATHS:
            for query in ("", f"?token={served.token}"):
                if path == "/events" and query:
                    continue  # a stream: below
                _, headers, _ = ask(served.port, path + query)
                for name, value in HEADERS.items():
                    assert headers[name.lower()] == value, (path, name)
        csp = HEADERS["Content-Security-Policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp and "http" not in csp
        assert "require-trusted-types-for 'script'" in csp
        conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
        conn.request("GET", served.at("/events")[len(served.base) :])
        r = conn.getresponse()
        assert r.getheader("Content-Security-Policy") == csp
        assert r.getheader("Content-Type") == "text/event-stream; charset=utf-8"
        conn.close()


def test_it_only_reads_and_changes_nothing(relay):
    ids = busy_home(relay)
    before = relay.snapshot()
    with web(relay) as served:
        for path in PATHS:
            for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
                status, headers, _ = ask(served.port, f"{path}?token={served.token}", method=method)
                assert status == 405 and headers["allow"] == "GET", (path, method)
        snapshot_doc(served)
        ask(served.port, served.at("/text", id=ids["queued"])[len(served.base) :])
        for path in ("/", "/app.js", "/app.css", "/icon.svg"):
            assert ask(served.port, served.at(path)[len(served.base) :])[0] == 200
    assert relay.snapshot() == before


@pytest.mark.sqlite_only
def test_port_option_and_a_port_in_use(relay):
    from testsupport.pgserver import free_port

    relay.join("alice")
    port = free_port()
    with web(relay, "--port", str(port)) as served:
        assert served.port == port
        before = relay.snapshot()
        r = relay.proc("web", "--no-open", "--port", str(port))
        assert r.code == 2 and r.out == ""
        assert f"usage_error: cannot serve on 127.0.0.1:{port}: something else listens" in r.err
        assert relay.snapshot() == before
    for bad in ("0", "65536", "x", "-1"):
        r = relay("web", "--no-open", "--port", bad)
        assert r.code == 2 and "--port" in r.err and r.out == ""


@pytest.mark.sqlite_only  # (on PostgreSQL the database holds the requests, not the home)
def test_a_missing_home_is_refused_before_anything_listens(relay, tmp_path):
    r = relay.proc("web", "--no-open", "--home", str(tmp_path / "nowhere"), timeout=20)
    assert r.code == 7 and r.out == "" and "no relay home exists" in r.err
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_ctrl_c_ends_it_and_leaves_nothing_running(home, how):
    home.join("alice")
    with web(home) as served:
        # a page listening on the stream: its thread and the database's watcher run
        conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
        conn.request("GET", served.at("/events")[len(served.base) :])
        stream = conn.getresponse()
        assert stream.fp.readline() == b"retry: 1000\n"
        threads = len(os.listdir(f"/proc/{served.proc.pid}/task"))
        assert threads >= 3  # main, the hub, the stream's
        children = Path(f"/proc/{served.proc.pid}/task/{served.proc.pid}/children")
        assert children.read_text().split() == []  # it starts no process
        t0 = time.monotonic()
        code, out, err = served.stop(how)
        took = time.monotonic() - t0
        conn.close()
    assert code == 0 and out == "", err
    assert took < 3, took
    assert "Traceback" not in err
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", served.port), timeout=2).close()


def test_stopping_waits_for_a_reader_and_then_nothing_touches_the_store(home):
    """The store is closed once the view stopped (design.md §17); closing a SQLite
    connection while another thread runs a statement on it crashes the process. So the
    hub's stop waits for a request that is reading, and a request after it is refused
    without touching the store."""
    from relay_cli.operate.web import hub as hubs

    home.join("alice")
    store = home.open_store()
    hub = hubs.Hub(store)
    inside, go_on = threading.Event(), threading.Event()
    reads = []
    real_read = hub._read

    def slow_read():
        reads.append(1)
        inside.set()
        go_on.wait(10)
        return real_read()

    hub._read = slow_read  # type: ignore[method-assign]
    reader = threading.Thread(target=hub.snapshot)
    stopping = threading.Thread(target=hub.stop)
    try:
        hub.start()
        reader.start()
        assert inside.wait(10)
        stopping.start()
        stopping.join(0.5)
        assert stopping.is_alive()  # the reader holds the connection: stop waits
        go_on.set()
        stopping.join(10)
        reader.join(10)
        assert not stopping.is_alive() and not reader.is_alive()
        assert not hub._thread.is_alive()
        with pytest.raises(hubs.Stopped):
            hub.snapshot()
        with pytest.raises(hubs.Stopped):
            hub.text(new_id())
        assert reads == [1]
    finally:
        go_on.set()
        store.close()


def test_stopping_ends_every_connection_and_waits_for_its_thread(home):
    """A page's event stream, and a connection that never sent its request (its thread
    waits up to 30 s for it), end when the view stops, and their threads are waited for
    before the store is closed."""
    from relay_cli.operate.web import hub as hubs
    from relay_cli.operate.web import server as servers

    home.join("alice")
    store = home.open_store()
    server = servers.make_server(hubs.Hub(store), 0)
    # (the accept loop in a thread of its own: the view's wait takes the main thread's
    # signals, which a test cannot give it)
    accepting = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    stream = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=10)
    idle = socket.create_connection(("127.0.0.1", server.server_port), timeout=10)
    try:
        server.hub.start()
        accepting.start()
        stream.request("GET", f"/events?token={server.token}")
        assert stream.getresponse().fp.readline() == b"retry: 1000\n"

        def requests() -> list[threading.Thread]:
            return [t for t in threading.enumerate() if t.name == "relay-web-request"]

        deadline = time.monotonic() + 10
        while len(requests()) < 2:  # (the idle one's thread waits for its request line)
            assert time.monotonic() < deadline
            time.sleep(0.01)
        server.shutdown()
        t0 = time.monotonic()
        server.stop()
        assert time.monotonic() - t0 < 3
        assert requests() == [] and not server.hub._thread.is_alive()
        assert idle.recv(1) == b""  # its connection was ended, not left waiting
    finally:
        stream.close()
        idle.close()
        store.close()


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="no pthread_kill")
def test_a_signal_ends_the_wait_whichever_thread_the_system_gives_it_to(home):
    """Python runs a signal's handler in the main thread only once the main thread
    runs again: a signal handled in another thread, or in the main one just before its
    wait began, left `relay web` waiting (serve_forever's wait, an hour long) instead of
    stopping. The view's wait also watches the signal wakeup fd."""
    from relay_cli.operate.web import hub as hubs
    from relay_cli.operate.web import server as servers

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers are the main thread's")
    home.join("alice")
    store = home.open_store()
    server = servers.make_server(hubs.Hub(store), 0)
    ended = threading.Event()

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    def other_thread() -> None:
        time.sleep(0.3)
        signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)  # handled here
        if not ended.wait(5):  # (a guard: the test fails, never hangs)
            signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)

    wakeup = signal.set_wakeup_fd(-1)  # (what it is: pytest's, if any)
    signal.set_wakeup_fd(wakeup)
    before = signal.signal(signal.SIGUSR1, interrupt)
    sender = threading.Thread(target=other_thread, daemon=True)
    try:
        sender.start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            server.serve_until_signal()
        took = time.monotonic() - t0
        ended.set()
        sender.join(10)
        assert took < 3, took
        assert signal.set_wakeup_fd(wakeup) == wakeup  # it put back the one it found
    finally:
        ended.set()
        signal.signal(signal.SIGUSR1, before)
        server.stop()
        store.close()


# ------------------------------------------------------------------ what the page is sent
def test_the_document_shows_what_the_database_holds_in_watchs_order(relay):
    ids = busy_web_home(relay)
    with web(relay) as served:
        doc = snapshot_doc(served)
    counts = doc["counts"]
    assert counts == {
        "needs_you": 0,
        "delivery_unknown": 1,
        "effect_unknown": 1,
        "awaiting_approval": 1,
        "open": 3,
        "queued": 1,
        "delivered": 1,
        "acknowledged": 1,
    }
    needs = doc["needs_person"]
    assert [s["name"] for s in needs] == [
        "agents",
        "delivery_unknown",
        "effect_unknown",
        "awaiting_approval",
    ]
    assert needs[0]["total"] == 0 and needs[0]["rows"] == []  # no agent waits for a person
    needs = needs[1:]
    (lost,) = needs[0]["rows"]
    assert lost["id"] == ids["lost"] and lost["short"] == ids["lost"][:8]
    assert (lost["from"], lost["to"], lost["reason"]) == ("alice", "bob", "claim_lease_expired")
    assert unscoped(lost["commands"]) == [
        f"relay resolve {ids['lost']} --outcome {o}" for o in ("completed", "failed", "requeue")
    ]
    (crashed,) = needs[1]["rows"]
    assert crashed["key"] == "migrate-1" and crashed["command"] == "true"
    assert unscoped(crashed["commands"]) == [
        f"relay ledger resolve migrate-1 --outcome {o}" for o in ("succeeded", "failed", "forget")
    ]
    (waiting,) = needs[2]["rows"]
    assert unscoped(waiting["commands"]) == ["relay approve deploy-1", "relay deny deploy-1"]
    lanes = {lane["name"]: lane for lane in doc["lanes"]}
    assert list(lanes) == ["queued", "delivered", "acknowledged", "recently_final"]
    for state, key in (("queued", "queued"), ("delivered", "delivered"), ("acknowledged", "acked")):
        (row,) = lanes[state]["rows"]
        assert row["id"] == ids[key] and row["state"] == state
        # expiry while queued, the claim lease while delivered (no --reply-within: none)
        assert bool(row["deadline"]) == (state != "acknowledged")
    assert [r["id"] for r in lanes["recently_final"]["rows"]] == [ids["done"]]
    assert lanes["recently_final"]["within_s"] == 3600
    assert sorted(e["key"] for e in doc["ledger"]["rows"]) == ["deploy-1", "migrate-1"]
    peers = {p["name"]: p for p in doc["peers"]}
    assert set(peers) == {"alice", "bob", "carol", "dave", "erin"}
    assert peers["carol"]["active"] is False and peers["alice"]["kind"] == "claude"
    # no hook of theirs reported anything (they joined with `peers join`, carol never did):
    # relay says it cannot tell (design.md §19)
    assert {(p["activity"], p["activity_since"]) for p in doc["peers"]} == {("unknown", None)}
    assert doc["events"][0]["state"] == "delivery_unknown"
    assert "text" not in json.dumps(doc["lanes"]).replace("text_bytes", "")  # no text unasked


HOSTILE_TOOL = (
    "<img src=x onerror=\"document.title='pwned'\"> \u202eevil\u202c \x1b[31mred\x1b[0m"
    " $(touch${IFS}x)"
)


def agents_need_a_person(relay) -> dict:
    """claude-1 asks for permission for a tool with a hostile name while it holds a
    claimed request; a minute later codex-1 asks too; gemini-1 only works (design.md
    §19). Returns the held request's id and gemini-1's environment."""
    fixtures = Path(__file__).parents[1] / "fixtures"

    def hook(runtime: str, env: dict, name: str, **fields) -> None:
        doc = json.loads((fixtures / runtime / f"{name}.json").read_text())
        r = relay("hook", runtime, input=json.dumps({**doc, **fields}), env=env)
        assert (r.code, r.out) == (0, ""), r  # only recorded: nothing printed, nothing decided

    claude = {**relay.join("claude-1", "--kind", "claude", "--lease", "1h"), "CLAUDE_ENV_FILE": ""}
    codex = relay.join("codex-1", "--kind", "codex", "--lease", "1h")
    gemini = relay.join("gemini-1", "--kind", "gemini", "--lease", "1h")
    held = new_id()
    assert relay.send(codex, "claude-1", "do it", request_id=held).code == 0
    assert relay("claim", "--id", held, "--lease", "1h", env=claude).code == 0
    hook("claude", claude, "user_prompt_submit", session_id="claude-session")
    hook(
        "claude", claude, "permission_request", session_id="claude-session", tool_name=HOSTILE_TOOL
    )
    relay.move_clock(60)
    hook("codex", codex, "permission_request")
    hook("gemini", gemini, "before_agent")
    return {"held": held, "gemini": gemini}


def test_agents_that_need_a_person_come_first_longest_first_with_what_they_hold(relay):
    """The page's needs-person list opens with the agents that wait for a person (the
    activity snapshot's one read, design.md §19), longest first, each with the requests
    it holds and what its runtime said, inert; every peer carries its activity."""
    ids = agents_need_a_person(relay)
    with web(relay) as served:
        doc = snapshot_doc(served)
    assert doc["counts"]["needs_you"] == 2
    agents = doc["needs_person"][0]
    assert (agents["name"], agents["total"], agents["more"]) == ("agents", 2, None)
    first, second = agents["rows"]
    assert (first["peer"], second["peer"]) == ("claude-1", "codex-1")  # longest first
    assert first["activity"] == "needs_person" and first["activity_cause"] == "permission"
    assert first["activity_asked"] is False  # relay hears Claude Code's wait end
    assert first["holds"] == [{"id": ids["held"], "short": ids["held"][:8]}]
    assert second["holds"] == [] and second["commands"] == []
    detail = first["activity_detail"]
    assert "\\u202eevil\\u202c" in detail and "\\x1b[31mred" in detail  # visible escapes
    assert "\u202e" not in detail and "\x1b" not in detail and "\n" not in detail
    assert detail.startswith("<img src=x onerror=")  # markup stays text: the page never parses it
    assert clock_ms(first["activity_since"]) < clock_ms(second["activity_since"])
    peers = {p["name"]: p for p in doc["peers"]}
    assert peers["claude-1"]["activity_detail"] == detail
    assert (peers["codex-1"]["activity"], peers["codex-1"]["activity_cause"]) == (
        "needs_person",
        "permission",
    )
    assert peers["gemini-1"]["activity"] == "working"
    assert peers["gemini-1"]["last_event_at"] and doc["silence_note_s"] == 600
    # what peers list says of each, the same
    listed = {p["name"]: p for p in relay("peers", "list", "--json").json["peers"]}
    for name, p in peers.items():
        assert (p["activity"], p["activity_since"], p["activity_cause"]) == (
            listed[name]["activity"],
            listed[name]["activity_since"],
            listed[name]["activity_cause"],
        )


def clock_ms(iso: str) -> int:
    from relay_cli.core import clock

    return clock.parse_iso(iso)


def test_a_requests_text_only_when_asked_and_never_in_a_url_or_a_log(relay):
    alice = relay.join("alice")
    relay.join("bob")
    rid = new_id()
    secret = "the words of the request, with\nits second line"
    assert relay.send(alice, "bob", secret, request_id=rid).code == 0
    with web(relay) as served:
        doc = snapshot_doc(served)
        assert "words" not in json.dumps(doc) and "second line" not in json.dumps(doc)
        status, _, body = ask(served.port, served.at("/text", id=rid)[len(served.base) :])
        assert status == 200
        text = json.loads(body)
        assert text == {
            "id": rid,
            "state": "queued",
            "text": secret,
            "reply": None,
            "pruned": False,
        }
        status, _, body = ask(served.port, served.at("/text", id=new_id())[len(served.base) :])
        assert status == 404 and json.loads(body)["error"]["code"] == "request_not_found"
        code, out, err = served.stop()
    assert code == 0
    assert out == ""  # stdout: the address alone (the first line, read above)
    # stderr: one line that says what it serves (the database's URL has no password)
    assert err.startswith("relay web: serving ") and err.endswith("; Ctrl-C stops it\n")
    where = relay.url.split("/")[3].split("?")[0] if relay.url else str(relay.home)
    assert err.count("\n") == 1 and where in err  # (the database's name, or the home)
    assert served.token not in err and "second line" not in err


def test_untrusted_strings_reach_the_page_inert(home):
    alice = home.join("alice")
    home.join("bob")
    rid = new_id()
    assert home.send(alice, "bob", HOSTILE, request_id=rid).code == 0
    key = "<img/src=x/onerror=alert(1)>;$(touch${IFS}x)"
    r = home.proc("once", "--approve", "--timeout", "0", "--key", key, "--", "echo", "\x1b]0;t\x07")
    assert r.code == 75, r.err
    with web(home) as served:
        raw = ask(served.port, served.at("/snapshot")[len(served.base) :])[2]
        text = ask(served.port, served.at("/text", id=rid)[len(served.base) :])[2]
    assert raw.isascii() and text.isascii()  # JSON escapes the rest
    doc, shown = json.loads(raw), json.loads(text)["text"]
    # control, bidi and zero-width characters made visible, as on a terminal (design.md §7)
    assert "\\u202e" in shown and "\\x1b[31m" in shown and "\\x07" in shown
    assert "\u202e" not in shown and "\x1b" not in shown and "\u200b" not in shown
    assert "<script>" in shown  # markup stays text: the page never parses it
    (entry,) = {s["name"]: s for s in doc["needs_person"]}["awaiting_approval"]["rows"]
    assert entry["key"] == key and entry["command"] == "echo '\\x1b]0;t\\x07'"
    # a command names the key as one shell word, whatever it holds
    assert shlex.split(entry["commands"][0]) == ["relay", "approve", key]


def test_the_commands_carry_the_scope_the_view_was_given(relay):
    """The commands carry the scope flags `relay web` was given on its command line, as
    every printed command does (design.md §14): pasted into the same shell they act on
    what the page shows; a home or database from the environment stays there."""
    busy_web_home(relay)
    with web(relay) as served:
        doc = snapshot_doc(served)
    commands = [c for s in doc["needs_person"] for r in s["rows"] for c in r["commands"]]
    assert len(commands) == 3 + 3 + 2
    assert not any("--home" in c or "--database-url" in c for c in commands), commands
    if relay.url:
        given, unset = ("--database-url", relay.url), "RELAY_DATABASE_URL"
    else:
        given, unset = ("--home", str(relay.home)), "RELAY_HOME"
    with web(relay, *given, env={unset: None}) as served:
        doc = snapshot_doc(served)
    commands = [c for s in doc["needs_person"] for r in s["rows"] for c in r["commands"]]
    assert len(commands) == 3 + 3 + 2
    assert all(shlex.split(c)[-2] == given[0] for c in commands), commands
    lanes = [lane["more"] for lane in doc["lanes"]]
    assert lanes == [None] * 4  # (all shown)


def test_a_lane_with_more_than_it_shows_names_the_command_that_lists_them(relay, monkeypatch):
    from relay_cli.operate import watch
    from relay_cli.operate.web.page import page_doc
    from relay_cli.requests.due import unit

    monkeypatch.setattr(watch, "OPEN_LIMIT", 2)
    alice = relay.join("alice")
    relay("peers", "add", "bob")
    for _ in range(3):
        relay.send(alice, "bob")
    store = relay.open_store()
    try:
        with unit(store, write=False) as now:
            doc = page_doc(watch.gather(store, now, final_within_s=60), "here")
    finally:
        store.close()
    queued = doc["lanes"][0]
    assert queued["total"] == 3 and len(queued["rows"]) == 2
    assert queued["more"] == "relay list --state queued"
    assert doc["lanes"][1]["more"] is None  # all shown (none)


# ------------------------------------------------------------------ live
def test_the_event_stream_sends_a_commit_within_a_second(relay):
    alice = relay.join("alice")
    relay.join("bob")
    with web(relay) as served:
        next_doc = stream(served)
        first = next_doc()
        assert first["counts"]["open"] == 0
        rid = new_id()
        assert relay.send(alice, "bob", request_id=rid).code == 0
        committed = time.monotonic()
        doc = next_doc()
        took = time.monotonic() - committed
    assert [r["id"] for r in doc["lanes"][0]["rows"]] == [rid]
    assert took < 1.0, took


def stream(served: RelayWeb):
    """The page's event stream: a function that returns its next document."""
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=15)
    conn.request("GET", served.at("/events")[len(served.base) :])
    response = conn.getresponse()

    def next_doc() -> dict:
        while True:
            line = response.fp.readline()
            assert line, "the stream ended"
            if line.startswith(b"data: "):
                return json.loads(line[6:])

    return next_doc


def test_a_deadline_that_passes_shows_without_any_commit(relay):
    """The view wakes for the next deadline as `relay wait` does (design.md §5): a
    queued request that expires moves to the final lane with nothing else happening.

    The request is sent while the view runs, by a clock set back so that it expires
    ``margin`` s later; should the view first show it already expired (a slow machine:
    no deadline was waited for), another is sent with twice the time."""
    alice = relay.join("alice")
    relay.join("bob")
    with web(relay) as served:
        next_doc = stream(served)
        assert next_doc()["lanes"][0]["rows"] == []
        for margin in (1, 2, 4, 8):
            rid = new_id()
            late = {"RELAY_TIME_OFFSET": str(margin - 30)}
            sent = relay.send(
                {**alice, **late}, "bob", "soon stale", "--ttl", "30s", request_id=rid
            )
            assert sent.code == 0, sent.err
            first = next_doc()  # the commit's
            if [r["id"] for r in first["lanes"][0]["rows"]] == [rid]:
                break
        else:
            raise AssertionError("the view never showed a request before it expired")
        t0 = time.monotonic()
        doc = next_doc()
        waited = time.monotonic() - t0
    final = {r["id"]: r["state"] for r in doc["lanes"][3]["rows"]}
    assert final[rid] == "expired"
    assert doc["lanes"][0]["rows"] == [] and waited < 10


def test_with_no_page_open_it_does_not_look_at_the_database(relay):
    """No page listens: no thread of it wakes at all (it would wake every 50 ms on
    SQLite, every 250 ms on PostgreSQL, to look for a change)."""
    relay.join("alice")
    with web(relay) as served:
        time.sleep(0.5)  # (its start-up done)

        def wakeups() -> int:
            tasks = Path(f"/proc/{served.proc.pid}/task")
            return sum(
                int(line.split()[1])
                for task in tasks.iterdir()
                for line in (task / "status").read_text().splitlines()
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"))
            )

        before = wakeups()
        time.sleep(3)
        assert wakeups() - before <= 2


def test_woken_without_a_write_or_a_deadline_it_does_not_read_again(relay):
    """What PostgreSQL's safety poll costs the view: one statement (the store's write
    mark), not a snapshot; a write, a passed deadline or time itself reads it again."""
    from relay_cli.core.clock import Clock
    from relay_cli.operate.web import hub as hubs

    alice = relay.join("alice")
    relay.join("bob")
    assert relay.send(alice, "bob", "expires in 30 s", "--ttl", "30s").code == 0
    store = relay.open_store()
    reads = []
    hub = hubs.Hub(store)
    real_read = hub._read
    hub._read = lambda: reads.append(1) or real_read()  # type: ignore[method-assign]
    hub.listeners = 1
    try:
        hub._check()
        hub._check()
        assert len(reads) == 1  # nothing written, no deadline passed
        assert relay.send(alice, "bob", "a write").code == 0
        hub._check()
        hub._check()
        assert len(reads) == 2
        store.clock = Clock("31")  # the first request's expiry passed
        hub._check()
        assert len(reads) == 3
        final = json.loads(hub.body)["lanes"][3]["rows"]
        assert [r["state"] for r in final] == ["expired"]
        hub._read_at -= hubs.REFRESH_S  # and now and then, whatever happened
        hub._check()
        assert len(reads) == 4
    finally:
        store.close()


# ------------------------------------------------------------------ the browser
@pytest.mark.sqlite_only
def test_the_browser_is_opened_through_a_private_file_never_with_the_token_in_argv(relay, tmp_path):
    relay.join("alice")
    seen = tmp_path / "seen"
    fake = tmp_path / "browser"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {seen}\ncat "${{1#file://}}" >> {seen}\n')
    fake.chmod(0o700)
    env = relay._env({"DISPLAY": ":0", "BROWSER": str(fake)})
    proc = subprocess.Popen(
        [sys.executable, "-m", "relay_cli", "web"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        url = proc.stdout.readline().decode().strip()
        deadline = time.monotonic() + 10
        while not (seen.exists() and "relay web" in seen.read_text()):
            assert time.monotonic() < deadline, "the browser was not opened"
            time.sleep(0.05)
        argv, page = seen.read_text().split("\n", 1)
        assert argv.startswith("file://") and "token" not in argv
        assert url in page.replace("&amp;", "&")
        opened = Path(argv[len("file://") :])
        assert stat.S_IMODE(opened.stat().st_mode) == 0o600
        assert stat.S_IMODE(opened.parent.stat().st_mode) == 0o700
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert not opened.parent.exists()  # removed when the view ended


@pytest.mark.sqlite_only
@pytest.mark.parametrize("env", [{"DISPLAY": None, "WAYLAND_DISPLAY": None}, {"DISPLAY": ":0"}])
def test_no_browser_without_a_display_or_with_no_open(relay, tmp_path, env):
    relay.join("alice")
    seen = tmp_path / "seen"
    fake = tmp_path / "browser"
    fake.write_text(f"#!/bin/sh\ntouch {seen}\n")
    fake.chmod(0o700)
    args = [] if "DISPLAY" in env and env["DISPLAY"] is None else ["--no-open"]
    full = relay._env({**env, "BROWSER": str(fake)})
    proc = subprocess.Popen(
        [sys.executable, "-m", "relay_cli", "web", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=full,
    )
    try:
        assert proc.stdout.readline().startswith(b"http://127.0.0.1:")
        time.sleep(1)  # (time for a browser that should not start)
        assert not seen.exists()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=10)


def test_the_view_names_its_database_without_a_url_relay_does_not_print():
    """The page and the serving line name the database shown (design.md §17): the home,
    the URL relay prints (design.md §13), or, when it prints none, no URL at all."""
    from pathlib import Path

    from relay_cli.operate.web.hub import where

    class Store:
        home = Path("/x/home")

        def __init__(self, given, printed):
            self.given, self.printed = given, printed

        def shared_url(self, with_password=False):
            return self.given if with_password else self.printed

    assert where(Store(None, None)) == "/x/home"
    assert where(Store("postgresql://u@h/db", "postgresql://u@h/db")) == "postgresql://u@h/db"
    shown = where(Store("postgresql://u:P@ssw0rd:2024@h/db", None))
    assert "ssw0rd" not in shown and "2024" not in shown and "/x/home" not in shown
