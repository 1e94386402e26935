"""Kill `relay once` at its worst moment, on purpose (design.md §10).

The worst moment is after the command's process exists and before its pid is committed:
an entry whose relay process is gone and that names no command looks crashed
(`effect_unknown`), so if the command were already running there, a person would be
invited to forget a key whose command still runs, and `--idempotent` would start a
second copy. relay's promise is that the command does not begin executing until its pid
is committed, so a kill there leaves nothing running.

Each trial starts ``relay once --idempotent --key K -- sh -c '…; sleep 1'`` with the
test-only pause at ``once-spawn`` switched on (relay run by ``bench/paused.py``, which
adds the pause outside the product), while a
concurrent writer takes relay.db's write lock (``BEGIN IMMEDIATE``) and holds it 30 ms,
then lets go for 30 ms, over and over. When relay announces the pause it is killed with
SIGKILL at a random moment in its first 0.5 s. A call that gets ``busy`` (exit 75, the
writer kept the lock past relay's 5 s busy timeout) is made again, as an agent would. Then:

- **in the window**: the entry is still ``running`` with no ``child_pid`` committed;
- **gone with a live command**: ``relay ledger show`` says ``effect_unknown`` while the
  command (which writes its pid to a file as it starts) is running;
- **ran after the kill**: the command began executing although relay died before
  committing its pid;
- the same call is made again (it reruns an ``--idempotent`` entry whose processes are
  gone); once every process has ended, a **double run** is a command that ran twice.

``python -m bench oncekill --trials 100`` is the full run.

``--pidns`` runs the same kill across PID namespaces (design.md §10: a host is one PID
namespace). Half the trials kill relay inside a sandbox of its own (``unshare --pid
--fork --mount-proc``, a shell as the sandbox's first process so that relay's death does
not end the sandbox) and make the second call from the machine's own namespace; the other
half kill relay in the machine's namespace and make the second call from inside a new
sandbox. Seen from the other namespace the entry is another host's: the second call must
answer ``in_progress`` (75) and run nothing while the entry's renewal is fresh; once it is
30 s old (relay's clock moved with ``RELAY_TIME_OFFSET``) the entry, which names no command
process, never began its command, so the call runs it (``reclaim``): exactly once in all,
the killed relay's forked process never running it. Needs root and util-linux's
``unshare``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .common import RELAY as RELAY_CMD
from .common import base_env, print_machine, relay
from .crash import _reap_group
from .paused import PAUSE_ENV

PAUSE_S = 5  # the test-only pause between spawn and commit (the kill ends it)
KILL_WITHIN_S = 0.5  # the kill lands at a random moment this long into the pause
COMMAND_S = 1  # how long the command runs once it begins executing
BUSY_RETRIES = 5
POINT = "once-spawn"
PAUSED = [sys.executable, str(Path(__file__).with_name("paused.py"))]  # relay, with the pause

WRITER = r"""
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], timeout=30, isolation_level=None)
while True:
    try:
        db.execute("BEGIN IMMEDIATE")
        time.sleep(0.030)
        db.execute("COMMIT")
    except sqlite3.OperationalError:
        pass
    time.sleep(0.030)
"""


def _alive(pid: int) -> bool:
    """Running (not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def _relay_under(pid: int) -> int | None:
    """The host pid of the relay process started under ``unshare`` (pid): the descendant
    that runs bench/paused.py (the Python program, not the ``unshare`` and the shell whose
    words name it)."""
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                words = f.read().split(b"\0")
        except OSError:
            words = []
        if len(words) > 1 and words[1].endswith(b"paused.py"):
            return p
        todo += _children(p)
    return None


# a sandbox of its own: a new PID namespace whose first process is a shell, so that
# killing relay inside it leaves the namespace (and what relay forked) alive
SANDBOX = ["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", '"$@"; sleep 3', "sh"]
# the same, for a call whose exit status counts (the shell exits with it)
ASK_IN_SANDBOX = ["unshare", "--pid", "--fork", "--mount-proc"]


def _pids(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def _entry(home: Path, key: str) -> dict | None:
    db = sqlite3.connect(home / "relay.db", timeout=30)
    db.row_factory = sqlite3.Row
    try:
        row = db.execute("SELECT * FROM ledger WHERE key = ?", (key,)).fetchone()
        return None if row is None else dict(row)
    finally:
        db.close()


def _wait(predicate, limit: float) -> bool:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def _pause_line(p: subprocess.Popen) -> str | None:
    """Read relay's stderr up to the pause announcement (None: relay never paused)."""
    while True:
        line = p.stderr.readline()
        if not line:
            return None
        text = line.decode("utf-8", "replace")
        if "TEST PAUSE" in text:
            return text


def trial(home: Path, work: Path, rng: random.Random, index: int) -> dict:
    key = f"kill-{index}"
    runs, pids = work / f"{key}.runs", work / f"{key}.pids"
    cmd = ["sh", "-c", f"echo $$ >> {pids}; echo run >> {runs}; sleep {COMMAND_S}"]
    pause = f"{POINT}={PAUSE_S}"
    argv = [*PAUSED, "once", "--key", key, "--idempotent", "--", *cmd]
    res = {
        "in_window": False,
        "gone_with_live_command": False,
        "ran_after_kill": False,
        "runs": 0,
        "busy_retries": 0,
        "missed": None,
        "problems": [],
    }
    for _ in range(BUSY_RETRIES):
        p = subprocess.Popen(
            argv,
            env=base_env(home, {PAUSE_ENV: pause}),
            cwd=work,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        line = _pause_line(p)
        if line is not None:
            break
        p.wait()
        p.stderr.close()
        _reap_group(p.pid, 5)
        if p.returncode != 75:
            res["problems"].append(f"relay did not pause (exit {p.returncode})")
            return res
        res["busy_retries"] += 1  # busy before the entry was written: call again
    else:
        res["problems"].append(f"busy {BUSY_RETRIES} times in a row")
        return res
    child = int(m.group(1)) if (m := re.search(r"command pid (\d+)", line)) else None
    if child is None:
        p.kill()
        p.wait()
        res["problems"].append(f"no pid in the pause line {line!r}")
        _reap_group(p.pid, 5)
        return res
    time.sleep(rng.uniform(0, KILL_WITHIN_S))
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    p.stderr.close()
    row = _entry(home, key)
    res["in_window"] = bool(row and row["state"] == "running" and row["child_pid"] is None)
    if not res["in_window"]:
        res["missed"] = None if row is None else f"{row['state']}, child_pid {row['child_pid']}"
    # the moment after the kill: the forked process either starts the command (it writes
    # its pid first) or ends without starting it
    _wait(lambda: not _alive(child) or child in _pids(pids), 5)
    shown = relay(home, "ledger", "show", key, "--json")
    state = shown.json["state"] if shown.code == 0 else None
    live = [pid for pid in _pids(pids) if _alive(pid)]
    res["gone_with_live_command"] = state == "effect_unknown" and bool(live)
    res["ran_after_kill"] = bool(_pids(pids)) and res["in_window"]
    # the same call again: an --idempotent entry whose processes are gone runs again
    for _ in range(BUSY_RETRIES):
        again = subprocess.run(
            argv,
            env=base_env(home),
            cwd=work,
            capture_output=True,
            timeout=120,
            start_new_session=True,
        )
        if again.returncode != 75 or b"busy" not in again.stderr:
            break
        res["busy_retries"] += 1
    _reap_group(p.pid, COMMAND_S + 10)  # the first command, if it ever began, ends too
    _wait(lambda: not any(_alive(pid) for pid in _pids(pids)), COMMAND_S + 10)
    res["runs"] = len(runs.read_text().splitlines()) if runs.exists() else 0
    if again.returncode != 0:
        res["problems"].append(
            f"the second call: exit {again.returncode} {again.stderr.decode()[-300:]}"
        )
    return res


def pidns_trial(home: Path, work: Path, rng: random.Random, index: int) -> dict:
    """One kill in the spawn window with the second call made from another PID namespace:
    relay killed in a sandbox and asked from this namespace (even trials), or killed here
    and asked from a sandbox (odd trials). The command runs once in all: by the call made
    after the entry went stale, never by the killed relay's forked process."""
    key = f"ns-kill-{index}"
    runs = work / f"{key}.runs"
    cmd = ["sh", "-c", f"echo run >> {runs}; sleep {COMMAND_S}"]
    inside = index % 2 == 0  # relay runs (and dies) inside the sandbox
    argv = ["once", "--key", key, "--idempotent", "--", *cmd]
    first = [*SANDBOX, *PAUSED, *argv] if inside else [*PAUSED, *argv]
    ask = [*RELAY_CMD, *argv] if inside else [*ASK_IN_SANDBOX, *RELAY_CMD, *argv]
    res = {"inside": inside, "in_window": False, "runs": 0, "answers": [], "problems": []}
    p = subprocess.Popen(
        first,
        env=base_env(home, {PAUSE_ENV: f"{POINT}={PAUSE_S}"}),
        cwd=work,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        line = _pause_line(p)
        target = _relay_under(p.pid) if inside else p.pid
        if line is None or target is None:
            res["problems"].append(f"relay did not pause (exit {p.poll()})")
            return res
        forked = _children(target)  # the command's process, held at its gate
        if not forked:
            res["problems"].append("relay's forked process was not found")
        time.sleep(rng.uniform(0, KILL_WITHIN_S))
        os.kill(target, signal.SIGKILL)
        row = _entry(home, key)
        res["in_window"] = bool(row and row["state"] == "running" and row["child_pid"] is None)
        if not res["in_window"]:
            res["problems"].append(f"the kill missed the window: {row}")
        # the forked process sees its gate close and ends (had it begun the command, it
        # would end once the command did, its line written)
        if not _wait(lambda: not any(_alive(pid) for pid in forked), COMMAND_S + 10):
            res["problems"].append(f"the killed relay's forked process still runs: {forked}")
        for offset, want in ((None, 75), ("40", 0)):
            extra = {} if offset is None else {"RELAY_TIME_OFFSET": offset}
            again = subprocess.run(
                ask,
                env=base_env(home, extra),
                cwd=work,
                capture_output=True,
                timeout=120,
                start_new_session=True,
            )
            code = again.returncode
            res["answers"].append(code)
            if code != want:
                res["problems"].append(
                    f"asked from the other namespace (offset {offset}): exit {code}, "
                    f"expected {want}: {again.stderr.decode()[-300:]}"
                )
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
        p.stderr.close()
    # every process that could run the command has ended: a command that began wrote its line
    res["runs"] = len(runs.read_text().splitlines()) if runs.exists() else 0
    if res["runs"] != (1 if res["answers"][1:2] == [0] else 0):
        res["problems"].append(f"the command ran {res['runs']} times")
    return res


def run_pidns(
    trials: int = 40, seed: int | None = None, root: Path | None = None, log=print
) -> dict:
    """The kill across PID namespaces (``--pidns``); see the module's docstring."""
    seed = random.randrange(1 << 30) if seed is None else seed
    rng = random.Random(seed)
    own = root is None
    root = Path(tempfile.mkdtemp(prefix="relay-oncekill-ns-")) if own else root
    home, work = root / "home", root / "work"
    work.mkdir(parents=True)
    r = relay(home, "peers", "add", "oncekill", "--json")  # creates the home
    if r.code != 0:
        raise RuntimeError(f"relay peers add: {r.err}")
    figures = {
        "trials": 0,
        "in_window": 0,
        "killed_inside": 0,
        "in_progress_answers": 0,
        "reclaimed_when_stale": 0,
        "double_runs": 0,
        "runs": 0,
        "problems": [],
        "seed": seed,
    }
    t0 = time.perf_counter()
    try:
        for i in range(trials):
            res = pidns_trial(home, work, rng, i)
            figures["trials"] += 1
            figures["in_window"] += res["in_window"]
            figures["killed_inside"] += res["inside"]
            figures["in_progress_answers"] += res["answers"][:1] == [75]
            figures["reclaimed_when_stale"] += res["answers"][1:2] == [0]
            figures["double_runs"] += res["runs"] > 1
            figures["runs"] += res["runs"]
            figures["problems"] += [f"trial {i}: {b}" for b in res["problems"]]
    finally:
        if own:
            shutil.rmtree(root, ignore_errors=True)
    figures["seconds"] = round(time.perf_counter() - t0, 1)
    log(
        f"once kill across PID namespaces: {figures['trials']} trials "
        f"({figures['killed_inside']} killed in a sandbox, the rest asked from one), "
        f"{figures['in_window']} kills between spawn and the pid commit; asked from the "
        f"other namespace: in_progress while fresh {figures['in_progress_answers']}, run "
        f"once after 30 s {figures['reclaimed_when_stale']}; double runs: "
        f"{figures['double_runs']}; "
        f"violations: {len(figures['problems'])} ({figures['seconds']} s)"
    )
    for p in figures["problems"][:10]:
        log(f"    {p}")
    return figures


def run(trials: int = 100, seed: int | None = None, root: Path | None = None, log=print) -> dict:
    seed = random.randrange(1 << 30) if seed is None else seed
    rng = random.Random(seed)
    own = root is None
    root = Path(tempfile.mkdtemp(prefix="relay-oncekill-")) if own else root
    home, work = root / "home", root / "work"
    work.mkdir(parents=True)
    # a command that starts from nothing creates the home and its database (sweep does not)
    r = relay(home, "peers", "add", "oncekill", "--json")
    if r.code != 0:
        raise RuntimeError(f"relay peers add: {r.err}")
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(home / "relay.db")])
    figures = {
        "trials": 0,
        "in_window": 0,
        "double_runs": 0,
        "gone_with_live_command": 0,
        "ran_after_kill": 0,
        "busy_retries": 0,
        "missed": [],
        "problems": [],
        "seed": seed,
    }
    t0 = time.perf_counter()
    try:
        for i in range(trials):
            res = trial(home, work, rng, i)
            figures["trials"] += 1
            figures["in_window"] += res["in_window"]
            figures["double_runs"] += res["runs"] > 1
            figures["gone_with_live_command"] += res["gone_with_live_command"]
            figures["ran_after_kill"] += res["ran_after_kill"]
            figures["busy_retries"] += res["busy_retries"]
            if res["missed"]:
                figures["missed"].append(f"trial {i}: {res['missed']}")
            if res["runs"] != 1:
                res["problems"].append(f"the command ran {res['runs']} times")
            figures["problems"] += [f"trial {i}: {b}" for b in res["problems"]]
    finally:
        writer.kill()
        writer.wait()
        if own:
            shutil.rmtree(root, ignore_errors=True)
    figures["seconds"] = round(time.perf_counter() - t0, 1)
    log(
        f"once kill: {figures['trials']} trials, {figures['in_window']} kills landed between "
        f"spawn and the pid commit; double runs: {figures['double_runs']}; effect_unknown "
        f"entries with a live command: {figures['gone_with_live_command']}; commands that "
        f"began after such a kill: {figures['ran_after_kill']}; calls repeated after busy: "
        f"{figures['busy_retries']} ({figures['seconds']} s)"
    )
    for m in figures["missed"][:10]:
        log(f"    kill outside the window, entry found: {m}")
    for p in figures["problems"][:10]:
        log(f"    {p}")
    return figures


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench oncekill")
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--pidns", action="store_true", help="kill and ask again across PID namespaces (root)"
    )
    a = ap.parse_args(argv)
    print_machine()
    if a.pidns:
        res = run_pidns(a.trials, a.seed)
        print(f"seed: {res['seed']}")
        if a.json:
            print(json.dumps(res, indent=2))
        return 1 if res["problems"] or res["double_runs"] else 0
    res = run(a.trials, a.seed)
    print(f"seed: {res['seed']}")
    if a.json:
        print(json.dumps(res, indent=2))
    bad = res["double_runs"] + res["gone_with_live_command"] + len(res["problems"])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
