"""What relay's hooks hand a runtime (design.md §12): text that survives the runtimes'
HTML escaping, and reads that stay bounded at any queue size."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import new_id
from test_hook_runtimes import stop_words

from relay_cli.agents import announce, guide, hook, runtimes, wake

# Characters that Codex and Gemini CLI HTML-escape on the way to the model (design.md
# §12): no text relay hands a runtime contains them.
ESCAPED = "<>&"

FIXTURES = Path(__file__).parents[1] / "fixtures"


def event(runtime: str, name: str, **changes) -> str:
    doc = json.loads((FIXTURES / runtime / f"{name}.json").read_text())
    doc.update(changes)
    return json.dumps(doc)


def texts_of(doc: dict | None) -> list[str]:
    if doc is None:
        return []
    out = [doc["reason"]] if "reason" in doc else []
    if "hookSpecificOutput" in doc:
        out.append(doc["hookSpecificOutput"]["additionalContext"])
    if "additionalContext" in doc:  # GitHub Copilot CLI's form
        out.append(doc["additionalContext"])
    return out


FIXTURE_NAMES = {
    "claude": {
        "SessionStart": "session_start",
        "UserPromptSubmit": "user_prompt_submit",
        "Stop": "stop",
        "SessionEnd": "session_end",
    },
    "codex": {
        "SessionStart": "session_start",
        "UserPromptSubmit": "user_prompt_submit",
        "Stop": "stop",
        "SessionEnd": "session_end",
    },
    "gemini": {
        "SessionStart": "session_start",
        "UserPromptSubmit": "before_agent",
        "Stop": "after_agent",
        "SessionEnd": "session_end",
    },
    # relay's plugin sends no SessionEnd (opencode has none): `relay run` leaves
    "opencode": {
        "SessionStart": "session_start",
        "UserPromptSubmit": "user_prompt_submit",
        "Stop": "stop",
    },
    "copilot": {
        "SessionStart": "session_start",
        "UserPromptSubmit": "user_prompt_submit",
        "Stop": "stop",
        "SessionEnd": "session_end",
    },
}


@pytest.mark.parametrize("runtime", runtimes.NAMES)
def test_no_text_relay_hands_a_runtime_holds_characters_it_would_escape(relay, tmp_path, runtime):
    """Codex and Gemini CLI HTML-escape hook text (`<<'EOF'` reaches the model as
    `&lt;&lt;'EOF'`): context, Stop reasons, waiter notes and the injected guide avoid
    `<`, `>` and `&`."""
    rt = runtimes.BY_NAME[runtime]
    names = FIXTURE_NAMES[runtime]
    emitted: list[str] = []

    def run(which: str, env: dict, **changes):
        r = relay("hook", runtime, input=event(runtime, names[which], **changes), env=env)
        assert r.code == 0, r
        if r.out:
            emitted.extend(texts_of(json.loads(r.out)))

    alice = relay.join("alice", "--lease", "24h")
    # SessionStart with no env file, as a runtime without one (or one not set) says it.
    run("SessionStart", {"RELAY_PEER": "agent-1", "CLAUDE_ENV_FILE": None})
    env_file = tmp_path / "env.sh"
    env = (
        relay.join("agent-1", "--kind", runtime)
        if not rt.env_files
        else {"RELAY_PEER": "agent-1", rt.env_files[0]: str(env_file)}
    )
    for _ in range(12):  # more than a hook lists
        relay.send(alice, "agent-1", request_id=new_id())
    run("SessionStart", env)
    run("SessionStart", env, source="compact")
    agent = (
        env
        if "RELAY_SESSION" in env
        else {
            k: v
            for k, v in (
                line.split(" ", 1)[1].split("=", 1) for line in env_file.read_text().splitlines()
            )
            if k in ("RELAY_PEER", "RELAY_SESSION")
        }
    )
    agent = {k: v.strip("'") for k, v in agent.items() if k.startswith("RELAY_")}
    bob = relay.join("bob")
    for outcome in ("reply", "fail"):
        rid = new_id()
        relay.send(agent, "bob", request_id=rid)
        relay("claim", "--id", rid, env=bob)
        relay(outcome, rid, *(["done"] if outcome == "reply" else ["--reason", "no"]), env=bob)
    lost = new_id()
    relay.send(agent, "bob", request_id=lost)
    relay("claim", "--id", lost, env=bob)
    relay.join("bob")  # supersedes: the claimed request becomes delivery_unknown
    run("UserPromptSubmit", env)
    run("Stop", env)
    relay("claim", env=agent)
    if "SessionEnd" in names:
        run("SessionEnd", env)
    else:
        relay("peers", "leave", env=agent)
    run("UserPromptSubmit", env)  # the ended note
    for r in runtimes.ALL:
        reqs = [announce.Named(i, i[:12], "alice", 16) for i in (new_id() for _ in range(5))]
        emitted.append(wake.note("agent-1", reqs, 7, r.name))
        emitted.append(guide.short_text("agent-1", r.name))
        emitted.append(guide.short_text("agent-1", r.name, kept=True))
    assert len(emitted) >= 6
    bad = [(t, c) for t in emitted for c in ESCAPED if c in t]
    assert bad == []


# ------------------------------------------------------------------- big queues
class Counting:
    """Wraps a store connection and counts the rows its queries return."""

    def __init__(self, db) -> None:
        self.db = db
        self.rows = 0

    def __getattr__(self, name):
        return getattr(self.db, name)

    def one(self, sql, params=()):
        row = self.db.one(sql, params)
        self.rows += row is not None
        return row

    def all(self, sql, params=()):
        rows = self.db.all(sql, params)
        self.rows += len(rows)
        return rows

    def scalar(self, sql, params=()):
        self.rows += 1
        return self.db.scalar(sql, params)

    def execute(self, sql, params=()):
        cur = self.db.execute(sql, params)
        outer = self

        class Cursor:
            def __getattr__(self, name):
                return getattr(cur, name)

            def fetchone(self):
                row = cur.fetchone()
                outer.rows += row is not None
                return row

            def fetchall(self):
                rows = cur.fetchall()
                outer.rows += len(rows)
                return rows

        return Cursor()


def bulk_queue(relay, to: str, n: int) -> None:
    """``n`` queued requests for ``to`` from alice, inserted in one statement."""
    start = int(time.time() * 1000) - n - 1000
    relay.sql(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
        "INSERT INTO requests (id, fingerprint, from_peer, to_peer, text, text_bytes, state, "
        "created_at, updated_at, expires_at, ttl_seconds, max_attempts, on_lost) "
        "SELECT 'bulk-' || i, 'f', 'alice', ?, 'x', 1, 'queued', ? + i, ? + i, ?, 86400, 3, "
        "'unknown' FROM n",
        (n, to, start, start, start + 7 * 86_400_000),
    )


@pytest.mark.parametrize("queued", [1_000, 5_000])
def test_hooks_read_a_bounded_number_of_rows_at_any_queue_size(relay, tmp_path, queued):
    """With a queue far beyond the 1,000 open requests a recipient may have, every hook
    event and the waiter's check read at most a few hundred rows (a Stop hook once read
    all 200,000 of a queue and ran past its 10 s timeout)."""
    env_file = tmp_path / "env.sh"
    hook_env = {"RELAY_PEER": "agent-1", "CLAUDE_ENV_FILE": str(env_file)}
    relay.join("alice")
    assert relay("hook", "claude", input=event("claude", "session_start"), env=hook_env).code == 0
    bulk_queue(relay, "agent-1", queued)
    sid = json.loads(event("claude", "session_start"))["session_id"]
    store = relay.open_store()
    counting = Counting(store.db)
    store.db = counting
    try:
        henv = hook.HookEnv(peer="agent-1", token=None, env_file=str(env_file))
        read = {}
        for name in ("user_prompt_submit", "stop", "stop_active"):
            counting.rows = 0
            ev = hook.parse(event("claude", name, session_id=sid).encode())
            doc = hook.handle(store, ev, henv)
            read[name] = counting.rows
            if name == "stop":  # (the prompt before listed the oldest five)
                assert doc["decision"] == "block"
                assert (
                    f"{queued - 5} requests for agent-1 wait (and 5 listed earlier)"
                    in stop_words(doc)
                )
                assert f"and {queued - 10} more: `relay inbox`" in stop_words(doc)
        counting.rows = 0
        session = store.session_for_agent(sid)
        assert wake._fresh(store, session["id"], "agent-1") == []  # all named by Stop
        read["waiter"] = counting.rows
    finally:
        store.db = counting.db
        store.close()
    assert max(read.values()) <= hook.MAX_SCANNED + 50, read


# ------------------------------------------------------------- idle hooks are cheap
@pytest.mark.one_backend
@pytest.mark.parametrize(
    "args", [["claude"], ["claude", "--wake"], ["codex", "--wake"], ["gemini"]]
)
def test_a_hook_with_no_identity_imports_no_command_line(relay, args):
    """Someone not using relay pays for relay's hooks next to nothing (design.md §12):
    with no --as, RELAY_PEER or RELAY_SESSION `relay hook` reads its event and exits 0
    before the command line (typer, the store) is imported."""
    import subprocess
    import sys

    from relay_cli import entry

    assert entry.HOOK_RUNTIMES == runtimes.NAMES
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "relay_cli", "hook", *args],
        input=event(args[0], "stop" if args[0] != "gemini" else "after_agent").encode(),
        capture_output=True,
        env=relay._env(None),
        timeout=60,
    )
    assert p.returncode == 0 and p.stdout == b""
    loaded = {
        line.rsplit("|", 1)[1].strip()
        for line in p.stderr.decode().splitlines()
        if line.startswith("import time:")
    }
    assert not any(m.startswith(("relay_cli.cli", "typer", "relay_cli.store")) for m in loaded)
    assert not entry.idle_hook(["hook", "claude", "--help"], {})
    assert not entry.idle_hook(["hook", "claude", "--as", "x"], {})
    assert not entry.idle_hook(["hook", "claude"], {"RELAY_PEER": "x"})
    assert not entry.idle_hook(["hook", "install", "claude"], {})
