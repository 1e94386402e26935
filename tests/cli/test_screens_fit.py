"""What a person sees (design.md §14), under a real pseudo-terminal of a given size.

A busy home (long peer names of every kind, requests in every state, a delivery_unknown
one, a session that lost its lease while holding work, `relay once` entries awaiting
approval and effect_unknown) is shown by `list`, `show --events`, `peers list`,
`ledger list`, `inbox`, `doctor` (pty) and `watch` (tmux, a real screen) at 80x24 and
at 200 columns. Every line fits the width, every row is one line, and every cell is its
value whole or a prefix of it ending with the ellipsis: nothing folds mid-word.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import shlex
import shutil
import struct
import subprocess
import sys
import termios
import time
import uuid

import pytest
from conftest import ANSI, Tmux, assert_fits, fake_crash

from relay_cli.core.output import cell_len

CLAUDE = "claude-frontend-refactor"
CODEX = "codex-backend-migrations-runner-eu-west"
GEMINI = "gemini-docs-reviewer"
AIDER = "aider-pair-programmer"
SCRIPT = "nightly-integration-check-script"
LAPSING = "claude-review-bot-lapsing"
ELLIPSIS = "\u2026"
STATES = {
    "queued",
    "delivered",
    "acknowledged",
    "completed",
    "failed",
    "rejected",
    "expired",
    "cancelled",
    "delivery_unknown",
}


def busy_home(relay) -> dict[str, str]:
    """Two hours of history laid out with RELAY_TIME_OFFSET (ages read as on a real day);
    the last step leaves a session whose lease has lapsed while it holds claimed work."""
    tokens: dict[str, str] = {}

    def run(
        ago: float,
        *args: str,
        who: str | None = None,
        text: str | None = None,
        ok: tuple[int, ...] = (0,),
    ):
        env = {"RELAY_TIME_OFFSET": str(-ago)}
        if who:
            env.update(RELAY_PEER=who, RELAY_SESSION=tokens.get(who))
        r = relay(*args, env=env, input=text)
        assert r.code in ok, (args, r.err)
        return r

    def join(ago: float, name: str, kind: str, lease: str = "3h") -> None:
        tokens[name] = run(
            ago, "peers", "join", name, "--kind", kind, "--lease", lease, "--json"
        ).json["token"]

    def send(ago: float, sender: str, to: str, text: str, *extra: str) -> str:
        rid = str(uuid.uuid4())
        run(ago, "send", "--to", to, "--id", rid, *extra, "--json", "-", who=sender, text=text)
        return rid

    for name, kind in (
        (CLAUDE, "claude"),
        (CODEX, "codex"),
        (GEMINI, "gemini"),
        (AIDER, "aider"),
        (SCRIPT, "script"),
    ):
        join(7200, name, kind)
    run(7200, "peers", "add", "ana", "--kind", "human")
    ids = {}
    ids["completed"] = rid = send(6000, CLAUDE, CODEX, "Add an index.")
    run(5900, "claim", "--id", rid, who=CODEX)
    run(5890, "ack", rid, who=CODEX)
    run(5000, "reply", rid, "-", who=CODEX, text="Done.")
    ids["failed"] = rid = send(4000, GEMINI, CODEX, "Rename a column.")
    run(3990, "claim", "--id", rid, who=CODEX)
    run(
        3900,
        "fail",
        rid,
        "--reason",
        "the migration needs a lock that production holds "
        "during business hours; retry after 18:00 UTC",
        who=CODEX,
    )
    ids["rejected"] = rid = send(3800, CODEX, CLAUDE, "Rewrite the login page.")
    run(3790, "claim", "--id", rid, who=CLAUDE)
    run(3780, "reject", rid, "--reason", "out of scope", who=CLAUDE)
    ids["expired"] = send(3700, CLAUDE, AIDER, "Pair on the flaky test.", "--ttl", "30s")
    ids["cancelled"] = rid = send(3500, CLAUDE, GEMINI, "Proofread.")
    run(3400, "cancel", rid, who=CLAUDE)
    ids["unknown"] = rid = send(3000, CLAUDE, CODEX, "Backfill the audit table.")
    run(2990, "claim", "--id", rid, "--lease", "10s", who=CODEX)
    ids["history"] = rid = send(
        2400,
        CLAUDE,
        CODEX,
        "Run the nightly check.",
        "--on-lost",
        "redeliver",
        "--reply-within",
        "5m",
    )
    run(2390, "claim", "--id", rid, "--lease", "10s", who=CODEX)
    run(2200, "claim", "--id", rid, who=CODEX)
    run(2190, "ack", rid, who=CODEX)
    run(2000, "reply", rid, "-", who=CODEX, text="All checks pass.")
    ids["acknowledged"] = rid = send(900, CLAUDE, CODEX, "Review PR 1234.", "--reply-within", "2h")
    run(890, "claim", "--id", rid, who=CODEX)
    run(880, "ack", rid, who=CODEX)
    ids["delivered"] = rid = send(700, CLAUDE, GEMINI, "Document the flags.")
    run(690, "claim", "--id", rid, "--lease", "1h", who=GEMINI)
    ids["queued"] = send(600, GEMINI, CLAUDE, "Check the README examples.")
    send(300, "ana", CODEX, "Plan the database upgrade. " * 40)
    run(200, "once", "--key", "pr-create-frontend-1234", "--", "true")
    run(
        190,
        "once",
        "--approve",
        "--timeout",
        "0",
        "--key",
        "deploy-production-2026-11-29",
        "--",
        "./deploy.sh",
        "--env",
        "production",
        "--tag",
        "v2.14.0",
        ok=(75,),
    )
    run(180, "once", "--key", "migrate-orders-table", "--", "true")
    fake_crash(relay, "migrate-orders-table")  # relay killed with its command mid-run
    join(120, LAPSING, "claude", lease="10s")
    ids["lapsing"] = rid = send(118, CLAUDE, LAPSING, "Look at the failing e2e test.")
    run(118, "claim", "--id", rid, "--lease", "1h", who=LAPSING)
    return ids


# ------------------------------------------------------------------ a real terminal
def cells(line: str) -> list[str]:
    return re.split(r" {2,}", line.strip())


def whole_or_cut(cell: str, value: str) -> bool:
    """The cell shows the value whole, or a prefix of it ending with the ellipsis, or its
    start and end around the ellipsis (names and reasons)."""
    if cell == value:
        return True
    head, cut, tail = cell.partition(ELLIPSIS)
    return (
        bool(cut)
        and value.startswith(head)
        and value.endswith(tail)
        and len(head) + len(tail) < len(value)
    )


def assert_words_whole(lines: list[str], source: str) -> None:
    """Wrapped prose: every word on screen is a word of the source (none split in two).
    Durations (``109s``) may have moved on between the two reads: they compare as one."""

    def words_of(text: str) -> list[str]:
        return [re.sub(r"^\d+[smhd]$", "N", w.rstrip(";,")) for w in text.split()]

    words = set(words_of(source))
    for ln in lines:
        for w in words_of(ln):
            assert w in words or (
                w.endswith(ELLIPSIS) and any(s.startswith(w[:-1]) for s in words)
            ), f"{w!r} is not a whole word: {ln!r}"


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    from conftest import Relay

    relay = Relay(tmp_path_factory.mktemp("screens") / "relay-home")
    return relay, busy_home(relay)


SIZES = [(80, 24), (200, 50)]


@pytest.mark.parametrize("cols,rows", SIZES)
def test_doctor_fits_with_areas_first_problems_last_and_whole_words(home, cols, rows):
    relay, ids = home
    report = relay("doctor", "--json").json  # doctor applies nothing: the lapsed lease shows
    raw, text = relay.screen("doctor", cols=cols, rows=rows)
    lines = assert_fits(text, cols)
    checks = report["checks"]
    problems = [c for c in checks if c["status"] != "ok"]
    assert {c["name"] for c in problems} >= {
        "delivery_unknown",
        "ledger",
        "approvals",
        f"lapsed:{LAPSING}",
    }
    assert (
        lines[-1] == f"relay doctor: 0 fail, {len(problems)} warn, {len(checks) - len(problems)} ok"
    )
    # one line per area first, then the problems: none of them above an area line
    areas = [
        ln.split()[1]
        for ln in lines
        if re.match(r"^[\u2713!\u2717] \w+ +\S", ln)
        and not ln.startswith(("! warn", "\u2717 fail"))
    ]
    assert areas == ["relay", "home", "database", "work", "peers"]
    first_problem = next(i for i, ln in enumerate(lines) if ln.startswith("! warn"))
    assert all(not ln.startswith("\u2713") for ln in lines[first_problem:])
    if rows >= 50:  # room for every problem whole, wrapped between words
        prose = " ".join(f"{c['name']}: {c['detail']}" for c in problems)
        assert_words_whole(
            [
                ln.removeprefix("! warn").lstrip()
                for ln in lines[first_problem:-1]
                if not ln.lstrip().startswith("\u2192")
            ],
            prose,
        )
        lapsed = next(i for i, ln in enumerate(lines) if f"lapsed:{LAPSING}" in ln)
        assert ids["lapsing"][:8] in " ".join(lines[lapsed : lapsed + 4])
    joined = re.sub(r" \\\n +", " ", text)  # a command wrapped with ` \` is one command
    # the home came from RELAY_HOME, which a pasted command inherits (design.md §14)
    assert re.search(r"^ *\u2192 relay list --state delivery_unknown$", joined, re.M), joined
    assert "\x1b[" in raw  # coloured on a terminal


@pytest.mark.parametrize("cols,rows", SIZES)
def test_list_is_one_line_per_request_with_whole_or_cut_cells(home, cols, rows):
    relay, _ = home
    requests = {r["id"][:8]: r for r in relay("list", "--json").json["requests"]}
    raw, text = relay.screen("list", cols=cols, rows=rows)
    lines = assert_fits(text, cols)
    # at 80 columns the sender gives way first (the names are long): said under the table
    narrow = cols == 80
    header = (
        ["id", "state", "to", "reason", "since"]
        if narrow
        else ["id", "state", "from", "to", "reason", "since"]
    )
    assert cells(lines[0]) == header
    if narrow:
        assert lines[-1].startswith("(from left out at this width")
        lines = lines[:-1]
    assert len(lines) == 1 + len(requests)  # one line per row
    states = set()
    for ln in lines[1:]:
        row = dict(zip(header, cells(ln), strict=True))
        r = requests[row["id"][:8]]
        assert row["state"] == r["state"]  # states stay whole
        states.add(row["state"])
        assert whole_or_cut(row["to"], r["to"])
        assert narrow or whole_or_cut(row["from"], r["from"])
        assert row["reason"] == (r["reason"] or "-")  # a reason is never cut
        assert re.fullmatch(r"(\d+[dhms])+ ago", row["since"])  # since it is in its state
    assert states == STATES
    assert (ELLIPSIS in text) == narrow
    assert "\x1b[" in raw


@pytest.mark.parametrize("cols,rows", SIZES)
def test_show_events_is_one_line_per_event(home, cols, rows):
    relay, ids = home
    events = relay("show", ids["history"], "--events", "--json").json["events"]
    _, text = relay.screen("show", ids["history"], "--events", cols=cols, rows=rows)
    lines = assert_fits(text, cols)
    start = next(i for i, ln in enumerate(lines) if ln.startswith("events ("))
    assert cells(lines[start + 1]) == ["at", "state", "reason", "actor", "detail"]
    rows_ = lines[start + 2 :]
    assert len(rows_) == len(events) == 6
    for ln, e in zip(rows_, events, strict=True):
        at, state, reason, actor, detail = cells(ln)
        assert re.fullmatch(r"\d+[smhd] ago", at) and state == e["to_state"]
        assert whole_or_cut(reason, e["reason"] or "-")
        assert whole_or_cut(actor, e["actor"]) and whole_or_cut(detail, e["detail"] or "-")
    assert "reply due by" not in text  # a deadline that no longer applies is not shown


@pytest.mark.parametrize("cols,rows", SIZES)
def test_peers_ledger_and_inbox_are_one_line_per_row(home, cols, rows):
    relay, _ = home
    peers = {p["name"]: p for p in relay("peers", "list", "--json").json["peers"]}
    _, text = relay.screen("peers", "list", cols=cols, rows=rows)
    lines = assert_fits(text, cols)
    assert len(lines) == 1 + len(peers)
    assert cells(lines[0]) == [
        "name",
        "kind",
        "activity",
        "since",
        "lease left",
        "last seen",
        "wakeup",
    ]
    for ln in lines[1:]:
        name, kind, activity, *_ = cells(ln)
        full = next(n for n in peers if whole_or_cut(name, n))
        assert kind == peers[full]["kind"]
        assert whole_or_cut(re.split(r"[ :,(]", activity)[0], peers[full]["activity"])

    entries = {e["key"]: e for e in relay("ledger", "list", "--json").json["entries"]}
    _, text = relay.screen("ledger", "list", cols=cols, rows=rows)
    lines = assert_fits(text, cols)
    assert cells(lines[0]) == ["key", "state", "exit", "command", "changed"]
    table = lines[1 : 1 + len(entries)]
    assert {cells(ln)[0] for ln in table} == set(entries)  # keys are typed back: kept whole
    assert {cells(ln)[1] for ln in table} == {"succeeded", "awaiting_approval", "effect_unknown"}
    notes = lines[1 + len(entries) :]
    assert notes and notes[0].startswith("1 awaiting a person's approval")
    prose = [ln for ln in notes if not ln.lstrip().startswith("relay ")]
    assert_words_whole(
        prose,
        "1 awaiting a person's approval, decided in the person's own terminal; each "
        "shows the command and asks: 1 effect_unknown, needing a person: the outcome was "
        "never recorded and the next call does not run it again; each entry's page says "
        "why and names the commands that settle it:",
    )
    # each entry's commands, whole, one per line (design.md §14)
    commands = [ln.strip() for ln in notes if ln.lstrip().startswith("relay ")]
    waiting = next(k for k, e in entries.items() if e["state"] == "awaiting_approval")
    unknown = next(k for k, e in entries.items() if e["state"] == "effect_unknown")
    assert commands == [
        f"relay approve {shlex.quote(waiting)}",
        f"relay deny {shlex.quote(waiting)}",
        f"relay ledger show {shlex.quote(unknown)}",
    ], notes

    _, text = relay.screen("inbox", "--as", CODEX, cols=cols, rows=rows)
    lines = assert_fits(text, cols)
    assert cells(lines[0]) == ["id", "from", "created", "size"]
    assert len(lines) == 2 and cells(lines[1])[1] == "ana"


def test_piped_tables_keep_every_character(home):
    relay, ids = home
    p = subprocess.run(
        [sys.executable, "-m", "relay_cli", "list"],
        capture_output=True,
        text=True,
        env=relay._env({"COLUMNS": "80"}),
    )
    assert ids["queued"] in p.stdout and ELLIPSIS not in p.stdout and "\x1b" not in p.stdout
    assert re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", p.stdout)  # exact times
    assert any(len(ln) > 80 for ln in p.stdout.splitlines())


def test_colour_follows_no_color_force_color_and_term_dumb(home):
    relay, ids = home
    raw, _ = relay.screen("list", cols=80, rows=24, env={"NO_COLOR": "1"})
    assert "\x1b[" not in raw and ids["queued"][:8] in raw and ids["queued"] not in raw
    raw, _ = relay.screen("list", cols=80, rows=24, env={"TERM": "dumb"})
    assert "\x1b[" not in raw and ELLIPSIS in raw  # still fitted to the terminal
    forced = relay.proc("list", env={"FORCE_COLOR": "1", "COLUMNS": "80"})
    assert "\x1b[" in forced.out and all(
        cell_len(ANSI.sub("", ln)) <= 80 for ln in forced.out.splitlines()
    )
    both = relay.proc("list", env={"FORCE_COLOR": "1", "NO_COLOR": "1", "COLUMNS": "80"})
    assert "\x1b[" not in both.out and ELLIPSIS in both.out


# ------------------------------------------------------------------ watch on a real screen
needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def watch_screen(relay, cols: int, rows: int, term: str = "xterm-256color") -> str:
    t = Tmux(relay, "watch", cols=cols, rows=rows, env={"TERM": term})
    try:
        t.wait_for("leave")
        return t.pane()
    finally:
        t.kill()


@needs_tmux
@pytest.mark.parametrize("cols,rows", SIZES)
def test_watch_fits_the_screen_and_puts_what_needs_a_person_first(home, cols, rows):
    relay, ids = home
    screen = watch_screen(relay, cols, rows)
    lines = screen.rstrip("\n").split("\n")
    assert len(lines) <= rows and all(cell_len(ln) <= cols for ln in lines)
    assert lines[0].startswith(
        "relay watch: 2 delivery_unknown, 1 effect_unknown, 1 awaiting approval, "
    )
    titles = [ln for ln in lines if ln and not ln.startswith(" ")]
    order = [t.split(" (")[0] for t in titles[1:-1]]
    assert order[:4] == ["delivery_unknown", "effect_unknown", "awaiting approval", "open requests"]
    assert "q or Ctrl-C: leave" in lines[-1]
    assert ids["unknown"][:8] in screen and ids["lapsing"][:8] in screen
    if rows == 24:  # not everything fits: the rest is counted, not cut off
        assert re.search(r"\+\d+ more: relay|: \+\d+ \(relay", screen)
    else:
        assert "recent transitions" in screen and "+" not in screen.split("peers (")[0]


@needs_tmux
def test_watch_under_term_dumb_prints_plain_snapshots(home):
    relay, _ = home
    screen = watch_screen(relay, 80, 24, term="dumb")
    assert "relay watch: 2 delivery_unknown" in screen and "delivery_unknown (2)" in screen


def test_watch_in_a_dumb_terminal_writes_no_escape_codes(home):
    relay, _ = home
    pid, fd = pty.fork()
    if pid == 0:
        e = relay._env({"TERM": "dumb"})
        os.execve(sys.executable, [sys.executable, "-m", "relay_cli", "watch"], e)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    out = b""
    deadline = time.monotonic() + 20
    while b"leave" not in out and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1)
        if ready:
            out += os.read(fd, 65536)
    os.write(fd, b"q")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    text = out.decode()
    assert "\x1b" not in text and "relay watch: 2 delivery_unknown" in text
    assert len([ln for ln in text.replace("\r", "").split("\n") if ln.strip()]) <= 24


@pytest.mark.one_backend
def test_list_at_80_columns_keeps_reasons_and_since_whole_and_names_in_words(relay):
    """Before: at 80 columns list cut names and reasons mid-word (`claude-…ontend`,
    `recipie…nected`), and when ids widened (two sharing 11 characters) `since` was
    squeezed. Now a reason and since stay whole, a name is cut between its words, and the
    least useful column (the sender) is left out first, said under the table."""
    front, back, codex = (
        "claude-code-reviewer-frontend",
        "claude-code-reviewer-backend",
        "codex-migrations-eu-west",
    )
    who = {n: relay.join(n, "--lease", "1h") for n in (front, back, codex)}
    ids = [f"1a2b3c4d-5e{i}f-4000-8000-000000000001" for i in range(1, 5)]
    relay.send(who[codex], front, "a", request_id=ids[0])
    relay.send(who[codex], back, "b", request_id=ids[1])
    relay("claim", "--id", ids[0], "--lease", "10s", env=who[front])
    relay("claim", "--id", ids[1], env=who[back])
    relay.send(who[front], codex, "c", request_id=ids[2])
    relay.send(who[back], codex, "d", request_id=ids[3])
    relay("claim", "--id", ids[3], env=who[codex])
    relay("reject", ids[3], "--reason", "no", env=who[codex])
    relay.move_clock(20)
    relay("peers", "leave", env=who[back])
    _, text = relay.screen("list", cols=80, rows=24)
    lines = assert_fits(text, 80)
    lines = lines[[ln.startswith("id ") for ln in lines].index(True) :]  # (the clock warning)
    assert cells(lines[0]) == ["id", "state", "to", "reason", "since"]
    assert lines[-1].startswith("(from left out at this width")
    shown = {cells(ln)[0]: cells(ln) for ln in lines[1:-1]}
    assert sorted(shown) == [i[:12] for i in ids]
    for _rid, _state, to, reason, since in shown.values():
        assert reason in (
            "claim_lease_expired",
            "recipient_disconnected",
            "rejected_by_recipient",
            "-",
        )
        assert re.fullmatch(r"(\d+[dhms])+ ago", since)
        assert to in (codex, "claude…frontend", "claude…backend", "codex…eu-west"), to
