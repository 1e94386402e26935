"""What a person sees of `relay doctor` at 80x24 (design.md §11): every warn and fail is on
the last screen with its command, and each printed command, pasted into the same shell,
works and fixes or settles the home that was checked — not the default home.

A command carries the scope flags doctor was given on its command line (``--home``,
``--database-url``); a home or database from the environment stays there (design.md §14).
So the shell the commands are pasted into has the RELAY_HOME or RELAY_DATABASE_URL doctor
ran with, exported, when doctor took its scope from them; when doctor was given
``--home``, it has neither. Its HOME is another directory either way, so a command that
lost its scope would act on another home.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
from conftest import Relay, assert_fits, plain
from test_screens_fit import CODEX, LAPSING, busy_home

ROOT = Path(__file__).resolve().parents[2]
ROWS, COLS = 24, 80


def short_home(tmp_path_factory) -> Path:
    """A home whose path is as long as a person's usually is (~/.local/state/relay)."""
    del tmp_path_factory
    base = Path(tempfile.mkdtemp(prefix="rd-", dir="/tmp"))
    return base / "home"


def last_screen(raw: str) -> tuple[list[str], str]:
    """The lines on the screen when doctor has ended (the shell's prompt takes the last
    row), and the same joined with command continuations (` \\` + newline) undone."""
    lines = plain(raw).rstrip("\n").split("\n")
    screen = lines[-(ROWS - 1) :]
    joined = re.sub(r" \\\n +", " ", "\n".join(screen))
    return screen, joined


def paste(
    relay: Relay, command: str, tmp: Path, exported: bool = True
) -> subprocess.CompletedProcess:
    """Run ``command`` exactly as printed, in bash, with `relay` on PATH, in a shell whose
    HOME is elsewhere: with the RELAY_HOME (or RELAY_DATABASE_URL) that doctor ran with
    exported (``exported``), else with neither (doctor was given --home)."""
    bindir = tmp / "bin"
    if not bindir.exists():
        bindir.mkdir(parents=True)
        script = bindir / "relay"
        script.write_text(f'#!/bin/sh\nexec {sys.executable} -m relay_cli "$@"\n')
        script.chmod(0o755)
    scope = {} if exported else {"RELAY_HOME": None, "RELAY_DATABASE_URL": None}
    env = relay._env(
        {
            **scope,
            "HOME": str(tmp / "elsewhere"),
            "PYTHONPATH": str(ROOT),
            "PATH": f"{bindir}:{os.environ['PATH']}",
        }
    )
    return subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, env=env, timeout=120
    )


def claim_lease_runs_out(relay: Relay) -> str:
    """A request claimed with a 30 s lease (on_lost unknown) 140 s ago: its lease ran out
    110 s ago, after the busy home's last command, so none has applied it; and a draft that
    expired unsubmitted. Made before the busy home, whose later commands see nothing due."""
    tokens = {}
    for name in ("ops-bot", "night-runner"):
        r = relay(
            "peers",
            "join",
            name,
            "--kind",
            "script",
            "--lease",
            "3h",
            "--json",
            env={"RELAY_TIME_OFFSET": "-3800"},
        )
        tokens[name] = {"RELAY_PEER": name, "RELAY_SESSION": r.json["token"]}
    rid = str(uuid.uuid4())
    r = relay(
        "send",
        "--to",
        "night-runner",
        "--id",
        rid,
        "Rotate the logs.",
        env={**tokens["ops-bot"], "RELAY_TIME_OFFSET": "-141"},
    )
    assert r.code == 0, r.err
    r = relay(
        "claim",
        "--id",
        rid,
        "--lease",
        "30s",
        env={**tokens["night-runner"], "RELAY_TIME_OFFSET": "-140"},
    )
    assert r.code == 0, r.err
    r = relay(
        "prepare",
        "--to",
        "night-runner",
        "Later.",  # expired 100 s ago, unsubmitted
        env={**tokens["ops-bot"], "RELAY_TIME_OFFSET": "-3700"},
    )
    assert r.code == 0, r.err
    return rid


@pytest.fixture
def busy(relay, tmp_path_factory):
    """The busy home of the screen tests (many peers, requests in every state, a lapsed
    session holding work, ledger entries needing a person), plus a claim lease that has run
    out and an expired draft, on either backend."""
    home = Relay(short_home(tmp_path_factory), relay.url)
    lease_ran_out = claim_lease_runs_out(home)
    ids = busy_home(home)
    ids["lease_ran_out"] = lease_ran_out
    return home, ids


def test_every_problem_of_a_busy_home_is_on_the_last_screen_with_its_command(busy):
    relay, ids = busy
    env = None
    report = relay("doctor", "--json").json
    problems = [c for c in report["checks"] if c["status"] != "ok"]
    names = {c["name"] for c in problems}
    assert {
        "delivery_unknown",
        "ledger",
        "approvals",
        f"lapsed:{LAPSING}",
        "claim_leases",
        "stale_drafts",
        f"wakeup:{CODEX}",
    } <= names, names
    assert all(c["fix"] for c in problems)
    code, raw = relay.pty("doctor", cols=COLS, rows=ROWS, env=env)
    assert code == 0
    text = plain(raw)
    # every line fits, but a command's single word (a long path or URL) is never cut
    assert_fits("\n".join(ln for ln in text.split("\n") if " " in ln.strip()), COLS)
    screen, joined = last_screen(raw)
    for c in problems:
        assert c["name"] in joined, (c["name"], joined)
        assert c["fix"] in joined, (c["fix"], joined)
    assert screen[-1].startswith("relay doctor: 0 fail, ")
    # the report with -v has every check, each ok detail whole (wrapped, never cut)
    _, full = relay.screen("doctor", "-v", cols=COLS, rows=ROWS, env=env)
    assert "\u2026" not in "\n".join(
        ln
        for ln in full.split("\n")
        if "\u2713" not in ln and not ln.startswith(("! warn", "\u2717 fail"))
    )


@pytest.mark.sqlite_only
def test_the_last_screen_of_a_busy_home_holds_the_problems_and_the_v_line(busy):
    """Every problem keeps a line of its own (design.md §11), so in the busy home the area
    lines scroll away above them; what stays is the line that names `doctor -v`, every
    problem with its command, and the counts."""
    relay, _ = busy
    # given --home, every command carries it: the screen is fullest
    _, raw = relay.pty("doctor", "--home", relay.home, cols=COLS, rows=ROWS)
    screen, _ = last_screen(raw)
    assert screen[0].startswith(f"each problem in full: relay doctor -v --home {relay.home}"), (
        "\n".join(screen)
    )
    assert screen[-1].startswith("relay doctor: 0 fail, 9 warn")
    report = relay("doctor", "--json").json
    lines = [ln for ln in screen if ln.startswith("! warn")]
    assert len(lines) == sum(c["status"] == "warn" for c in report["checks"])


def test_pasted_commands_settle_the_busy_home_that_was_checked(busy, tmp_path):
    relay, ids = busy
    report = relay("doctor", "--json").json
    fixes = {c["name"]: c["fix"] for c in report["checks"] if c["fix"]}
    # the lapsed session and the lease that ran out: pasting `relay list --state
    # delivery_unknown` where RELAY_HOME is exported applies what was due and shows them
    p = paste(relay, fixes[f"lapsed:{LAPSING}"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert ids["lapsing"] in p.stdout and ids["lease_ran_out"] in p.stdout
    for name in ("ledger", "approvals"):
        p = paste(relay, fixes[name], tmp_path)
        assert p.returncode == 0, p.stderr
    assert "migrate-orders-table" in paste(relay, fixes["ledger"], tmp_path).stdout
    after = {c["name"]: c for c in relay("doctor", "--json").json["checks"]}
    assert f"lapsed:{LAPSING}" not in after
    assert after["claim_leases"]["status"] == "ok"
    assert after["delivery_unknown"]["status"] == "warn"  # now a person's, as it said
    # the expired draft: `relay prune` removes it
    p = paste(relay, fixes["stale_drafts"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert after["stale_drafts"]["status"] == "warn"
    checks = {c["name"]: c for c in relay("doctor", "--json").json["checks"]}
    assert checks["stale_drafts"]["status"] == "ok"
    # a hook install fix names the runtime: it runs as printed (in the shell's HOME)
    p = paste(relay, fixes[f"wakeup:{CODEX}"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "elsewhere" / ".codex").exists()


@pytest.mark.sqlite_only
def test_a_broken_home_shows_every_failure_and_its_pasted_fix_repairs_that_home(
    relay, tmp_path_factory, tmp_path
):
    home = Relay(short_home(tmp_path_factory))
    busy_home(home)
    os.chmod(home.home, 0o755)
    os.chmod(home.home / "relay.db", 0o644)
    report = home("doctor", "--json").json
    problems = [c for c in report["checks"] if c["status"] != "ok"]
    assert {c["name"] for c in problems} >= {"state_dir", "db_file"}
    assert next(c["fix"] for c in problems if c["name"] == "state_dir") == "relay doctor --fix"
    # given --home on its command line, doctor names it in every command, pasted into a
    # shell without RELAY_HOME
    given = home("doctor", "--json", "--home", home.home, env={"RELAY_HOME": None}).json
    problems = [c for c in given["checks"] if c["status"] != "ok"]
    code, raw = home.pty("doctor", "--home", home.home, cols=COLS, rows=ROWS)
    assert code == 7
    _, joined = last_screen(raw)
    for c in problems:
        assert c["name"] in joined and c["fix"] in joined, c
    fix = next(c["fix"] for c in problems if c["name"] == "state_dir")
    assert fix == f"relay doctor --fix --home {home.home}"
    p = paste(home, fix, tmp_path, exported=False)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "fixed: " in p.stdout
    assert not (tmp_path / "elsewhere").exists() or not any(
        (tmp_path / "elsewhere").rglob("relay.db")
    )  # nothing was made in another home
    after = home("doctor", "--json")
    assert after.code == 0 and all(
        c["status"] == "ok" for c in after.json["checks"] if c["name"] in ("state_dir", "db_file")
    )


@pytest.mark.sqlite_only
def test_a_symlinked_home_is_not_offered_fix_but_the_directory_it_points_to(relay, tmp_path):
    real = tmp_path / "real"
    relay.home = real
    relay.join("alice")
    link = tmp_path / "link"
    link.symlink_to(real)
    relay.home = link
    check = next(c for c in relay("doctor", "--json").json["checks"] if c["name"] == "state_dir")
    assert check["status"] == "fail" and "--fix" not in check["fix"]
    assert check["fix"] == f"relay doctor --home {real}"
    p = paste(relay, check["fix"], tmp_path)
    assert p.returncode == 0, p.stdout


@pytest.mark.sqlite_only
def test_a_corrupt_database_names_the_command_that_moves_it_aside(relay, tmp_path):
    relay.join("alice")
    db = relay.home / "relay.db"
    db.write_bytes(b"this is not a database" * 100)
    checks = relay("doctor", "--json").json["checks"]
    bad = next(c for c in checks if c["status"] == "fail")
    assert "database_corrupt" in bad["detail"] and bad["fix"].startswith("mv -- ")
    p = paste(relay, bad["fix"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert not db.exists() and list(relay.home.glob("relay.db.aside-*"))
    assert relay("doctor").code == 0


@pytest.mark.sqlite_only
def test_a_read_only_home_is_not_all_ok(relay, tmp_path):
    """A home relay cannot write to (a file system mounted read-only; for a user other
    than root, a mode without the owner's write bit) fails `writable`: every command
    would fail when it writes."""
    relay.join("alice")
    if os.geteuid() != 0:
        os.chmod(relay.home, 0o500)
        try:
            doc = relay("doctor", "--json").json
        finally:
            os.chmod(relay.home, 0o700)
    else:
        if shutil.which("unshare") is None:
            pytest.skip("needs unshare to mount the home read-only")
        home = str(relay.home)
        script = (
            f"mount --bind {home} {home} && mount -o remount,bind,ro {home} && "
            f"exec {sys.executable} -m relay_cli doctor --json"
        )
        p = subprocess.run(
            ["unshare", "-m", "sh", "-c", script],
            capture_output=True,
            text=True,
            env=relay._env({"PYTHONPATH": str(ROOT)}),
        )
        if "mount" in p.stderr and not p.stdout:
            pytest.skip(f"cannot mount here: {p.stderr.strip()}")
        import json

        doc = json.loads(p.stdout)
    check = next(c for c in doc["checks"] if c["name"] == "writable")
    assert check["status"] == "fail" and "writes" in check["detail"], check
    assert doc["ok"] is False


@pytest.mark.sqlite_only
@pytest.mark.skipif(os.geteuid() == 0, reason="root writes whatever the mode")
def test_doctor_fix_gives_back_the_owners_write_bit(relay, tmp_path):
    relay.join("alice")
    os.chmod(relay.home / "relay.db", 0o400)
    check = next(c for c in relay("doctor", "--json").json["checks"] if c["name"] == "writable")
    assert check["status"] == "fail"
    p = paste(relay, check["fix"], tmp_path)
    assert p.returncode == 0
    assert (os.stat(relay.home / "relay.db").st_mode & 0o777) == 0o600


def test_a_queue_above_80_percent_of_its_cap_is_a_warning(world, tmp_path):
    relay, alice, bob = world
    for _ in range(5):
        assert relay.send(alice, "bob", "x").code == 0
    env = {"RELAY_QUEUE_CAP": "6"}
    checks = {c["name"]: c for c in relay("doctor", "--json", env=env).json["checks"]}
    assert checks["queue:bob"]["status"] == "warn"
    assert "5 open requests of a cap of 6" in checks["queue:bob"]["detail"]
    assert "queue:alice" not in checks
    ok = {
        c["name"]: c for c in relay("doctor", "--json", env={"RELAY_QUEUE_CAP": "7"}).json["checks"]
    }
    assert "queue:bob" not in ok and ok["queues"]["status"] == "ok"
    p = paste(relay, checks["queue:bob"]["fix"], tmp_path)
    assert p.returncode == 0 and p.stdout.count("queued") == 5


@pytest.mark.postgres_only
def test_a_password_in_the_url_is_never_printed_in_a_command(world, tmp_path):
    """The URL with a password (which a trusting server accepts), given by --database-url,
    gives commands that read it from $RELAY_DATABASE_URL; pasted where it is exported,
    they run on that database. The same URL in the environment stays there."""
    relay, alice, bob = world
    rid = relay.send(alice, "bob", "x").json["id"]
    assert relay("claim", "--id", rid, "--lease", "30s", env=bob).code == 0
    secret = "Hunter2Secret"
    url = f"{relay.url}{'&' if '?' in relay.url else '?'}password={secret}"
    env = {"PGPASSFILE": "/nonexistent", "RELAY_TIME_OFFSET": "60"}
    r = relay("doctor", "--json", env={"RELAY_DATABASE_URL": url, **env})
    assert secret not in r.out
    fix = next(c["fix"] for c in r.json["checks"] if c["name"] == "claim_leases")
    assert fix == "relay list --state delivery_unknown" and "commands_note" not in r.json
    r = relay("doctor", "--json", "--database-url", url, env={"RELAY_DATABASE_URL": None, **env})
    assert secret not in r.out
    assert "export it first" in r.json["commands_note"]
    fix = next(c["fix"] for c in r.json["checks"] if c["name"] == "claim_leases")
    assert '--database-url "${RELAY_DATABASE_URL:?' in fix
    p = paste(
        relay,
        f"export RELAY_DATABASE_URL='{url}'; RELAY_TIME_OFFSET=60 {fix}",
        tmp_path,
        exported=False,
    )
    assert p.returncode == 0, p.stderr
    assert rid in p.stdout  # the same database: the request, now delivery_unknown
    p = paste(relay, fix, tmp_path, exported=False)  # not exported: the shell refuses
    assert p.returncode != 0 and "export the database URL first" in p.stderr


@pytest.mark.postgres_only
def test_a_password_that_pgpass_supplies_is_left_out_of_a_runnable_url(world, tmp_path):
    """When ~/.pgpass (here PGPASSFILE) has the URL's password, the commands carry the URL
    without it, and they connect as printed."""
    from urllib.parse import urlsplit

    relay, alice, bob = world
    rid = relay.send(alice, "bob", "x").json["id"]
    assert relay("claim", "--id", rid, "--lease", "30s", env=bob).code == 0
    secret = "Pgpass7Secret"
    url = f"{relay.url}{'&' if '?' in relay.url else '?'}password={secret}"
    parts = urlsplit(relay.url)
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"*:*:{parts.path.lstrip('/')}:*:{secret}\n")
    passfile.chmod(0o600)
    r = relay(
        "doctor",
        "--json",
        "--database-url",
        url,
        env={"RELAY_DATABASE_URL": None, "PGPASSFILE": str(passfile), "RELAY_TIME_OFFSET": "60"},
    )
    assert secret not in r.out
    fix = next(c["fix"] for c in r.json["checks"] if c["name"] == "claim_leases")
    assert "RELAY_DATABASE_URL" not in fix and "--database-url 'postgresql://" in fix
    p = paste(relay, f"RELAY_TIME_OFFSET=60 PGPASSFILE={passfile} {fix}", tmp_path, exported=False)
    assert p.returncode == 0, p.stderr
    assert rid in p.stdout


@pytest.mark.sqlite_only
def test_a_fail_and_a_warn_that_share_a_command_are_listed_above_it_once(relay):
    """An unsafe home fails `state_dir` and leaves the database unopened (a warn): both are
    settled by `relay doctor --fix`, which is printed once, under both."""
    relay.join("alice")
    os.chmod(relay.home, 0o777)
    try:
        report = relay("doctor", "--json").json
        fixes = [(c["status"], c["fix"]) for c in report["checks"] if c["status"] != "ok"]
        assert {s for s, _ in fixes} == {"fail", "warn"} and len({f for _, f in fixes}) == 1
        _, raw = relay.pty("doctor", cols=COLS, rows=ROWS)
    finally:
        os.chmod(relay.home, 0o700)
    lines, _ = last_screen(raw)
    assert sum("relay doctor --fix" in ln for ln in lines) == 1, lines
    assert max(i for i, ln in enumerate(lines) if ln.startswith(("✗", "!", "x "))) < next(
        i for i, ln in enumerate(lines) if "relay doctor --fix" in ln
    )


@pytest.mark.sqlite_only
@pytest.mark.parametrize("how", ["file", "symlink_to_file"])
def test_a_home_that_is_a_users_file_gets_no_move_command(relay, tmp_path, how):
    """RELAY_HOME naming a shell rc file (or a dotfile manager's link to one): doctor says
    what is wrong and how to point relay elsewhere, and prints no command that moves or
    changes the file (pasted, the old `mv` moved the user's .bashrc)."""
    rc = tmp_path / ".bashrc"
    rc.write_text("export PATH=$HOME/bin:$PATH\n")
    home = rc
    if how == "symlink_to_file":
        home = tmp_path / ".bashrc-link"
        home.symlink_to(rc)
    relay.home = home
    r = relay("doctor", "--json")
    state = next(c for c in r.json["checks"] if c["name"] == "state_dir")
    assert state["status"] == "fail" and "RELAY_HOME" in state["detail"]
    for c in r.json["checks"]:
        assert not (c["fix"] or "").startswith("mv"), c
        assert str(home) + "." not in (c["fix"] or ""), c
    assert state["fix"].startswith("relay doctor --home ")
    _, screen = relay.screen("doctor", cols=80, rows=24)
    assert "mv --" not in screen
    if state["fix"]:
        paste(relay, state["fix"], tmp_path)
    assert rc.read_text() == "export PATH=$HOME/bin:$PATH\n" and home.exists()


@pytest.mark.sqlite_only
def test_a_corrupt_database_not_as_relay_makes_it_gets_no_move_command(relay, tmp_path):
    """Only a relay.db as relay makes it (a regular file of yours, open to nobody else) gets
    `mv`; one that is a hard link's other name with another mode is left alone."""
    relay.join("alice")
    db = relay.home / "relay.db"
    db.write_bytes(b"this is not a database" * 100)
    from relay_cli.operate.doctor.judge import relays_file

    assert relays_file(relay.home, "relay.db")
    assert not relays_file(tmp_path, "nothing-here")
    (tmp_path / "group-readable").write_text("x")
    os.chmod(tmp_path / "group-readable", 0o640)
    assert not relays_file(tmp_path, "group-readable")


@pytest.mark.sqlite_only
def test_a_missing_home_is_not_created_yet_never_safe_and_writable(relay, tmp_path):
    relay.home = tmp_path / "mistyped"
    _, screen = relay.screen("doctor", cols=80, rows=24)
    assert "safe and writable" not in screen
    assert "not created yet" in screen.split("home", 1)[1].splitlines()[0]
    _, verbose = relay.screen("doctor", "-v", cols=80, rows=24)
    assert "safe and writable" not in verbose
    state = next(c for c in relay("doctor", "--json").json["checks"] if c["name"] == "state_dir")
    assert "not created yet" in state["detail"] and "relay list" in state["detail"]
    assert not relay.home.exists()


def test_problems_that_share_a_command_each_keep_a_line_with_what_they_name(busy):
    """Cut to fit 80x24, a lapsed session and a claim lease that ran out are not merged into
    one cut line: each problem has a line of its own on the last screen, which shows the
    session's name and the ids of the requests it names."""
    relay, ids = busy
    _, raw = relay.pty("doctor", cols=COLS, rows=ROWS)
    screen, joined = last_screen(raw)
    lapsed = next(ln for ln in screen if f"lapsed:{LAPSING}" in ln)
    assert "delivery_unknown" not in lapsed.split(f"lapsed:{LAPSING}")[0], lapsed
    lease = next(ln for ln in screen if "claim_leases:" in ln)
    assert ids["lease_ran_out"][:8] in lease, lease
    report = relay("doctor", "--json").json
    held = next(c for c in report["checks"] if c["name"] == f"lapsed:{LAPSING}")
    shown = held["detail"].split("holds ")[1][:8]
    assert shown in lapsed, (shown, lapsed)


def test_doctor_verbose_lines_fit_80_columns(busy):
    relay, _ = busy
    _, full = relay.screen("doctor", "-v", cols=COLS, rows=ROWS)
    # a single word longer than the line (a path) is never cut; every other line fits
    assert_fits("\n".join(ln for ln in full.split("\n") if " " in ln.strip()), COLS)
