"""Fault injection: full disk, read-only state directory, a long lock, a WAL left by a kill.

Each function builds its own situation, runs the real relay, and returns a dict of what it
saw plus a list of ``problems`` (empty when relay behaved as design.md §2/§7/§9 say). Mounting
needs root and a kernel that lets this process mount; ``MountUnavailable`` says when not.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from .common import base_env, check_db, cleanup, join, new_id, print_machine, relay

TEXT = "fault test request body " * 40  # ~1 KB


class MountUnavailable(Exception):
    pass


@contextmanager
def tmpfs(size: str):
    """A size-limited tmpfs on a fresh directory; unmounted afterwards."""
    d = Path(tempfile.mkdtemp(prefix="relay-fault-"))
    p = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(d)],
        capture_output=True,
        text=True,
    )
    if p.returncode != 0:
        os.rmdir(d)
        raise MountUnavailable(f"mount -t tmpfs is not allowed here: {p.stderr.strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], capture_output=True)
        try:
            os.rmdir(d)
        except OSError:
            pass


def _snapshot(home: Path) -> dict:
    db = sqlite3.connect(f"file:{home / 'relay.db'}?mode=ro", uri=True)
    try:
        tables = [
            r[0]
            for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")
        ]
        return {t: db.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall() for t in tables}
    finally:
        db.close()


def _fill(mount: Path, leave: int) -> Path:
    """Fill the file system, leaving about ``leave`` bytes free."""
    filler = mount / "filler"
    with open(filler, "wb") as f:
        chunk = b"\0" * 65536
        while True:
            st = os.statvfs(mount)
            free = st.f_bavail * st.f_frsize
            if free <= leave:
                break
            try:
                f.write(chunk[: max(4096, min(len(chunk), free - leave))])
                f.flush()
            except OSError as e:
                if e.errno == errno.ENOSPC:
                    break
                raise
    return filler


def full_disk(leaves=(0, 4096, 16384, 65536, 262144)) -> dict:
    """Fill a small tmpfs to several levels; each send must be storage_error with the old
    data intact and nothing of the new request, and succeed once space is back."""
    out: dict = {"cases": [], "problems": []}
    for leave in leaves:
        with tmpfs("4m") as mnt:
            home = mnt / "home"
            a = join(home, "a")
            join(home, "b")
            env = {**a, "RELAY_RATE_LIMIT": "0"}
            old = []
            for _ in range(5):
                rid = new_id()
                r = relay(
                    home, "send", "--to", "b", "--id", rid, "--json", "-", input=TEXT, env=env
                )
                assert r.code == 0, r.err
                old.append(rid)
            before = _snapshot(home)
            filler = _fill(mnt, leave)
            codes = []
            rid = None
            # a few sends (the first may fit in the space left): at least one must fail
            for _ in range(40):
                rid = new_id()
                big = "x" * 30000
                r = relay(home, "send", "--to", "b", "--id", rid, "--json", "-", input=big, env=env)
                codes.append((r.code, r.error_code))
                if r.code != 0:
                    break
                old.append(rid)  # accepted while the disk filled: must survive too
            case = {"free_bytes_left": leave, "results": codes}
            out["cases"].append(case)
            if not codes or codes[-1][0] != 7 or codes[-1][1] != "storage_error":
                out["problems"].append(
                    f"leave={leave}: expected storage_error exit 7, got {codes[-3:]} {r.err[-300:]}"
                )
            if "Traceback" in r.err:
                out["problems"].append(f"leave={leave}: traceback on stderr")
            os.unlink(filler)
            after = _snapshot(home)
            for t, rows in before.items():
                if t == "requests":
                    kept = {row[0] for row in after[t]}
                    if not set(old) <= kept:
                        out["problems"].append(f"leave={leave}: old requests lost")
                elif t in ("events",):
                    if after[t][: len(rows)] != rows:
                        out["problems"].append(f"leave={leave}: old events changed")
            failed_row = [row for row in after["requests"] if row[0] == rid]
            if failed_row:
                out["problems"].append(f"leave={leave}: the refused request was stored")
            problems = check_db(home, set(old))
            out["problems"] += [f"leave={leave}: {p}" for p in problems]
            r = relay(
                home, "send", "--to", "b", "--id", rid, "--json", "-", input="x" * 30000, env=env
            )
            case["retry_after_space_freed"] = r.code
            if r.code != 0:
                out["problems"].append(f"leave={leave}: retry after freeing space: {r.err[-200:]}")
    return out


def read_only() -> dict:
    """A state directory on a file system remounted read-only (root ignores chmod)."""
    out: dict = {"problems": []}
    with tmpfs("8m") as mnt:
        home = mnt / "home"
        a = join(home, "a")
        join(home, "b")
        rid = new_id()
        r = relay(home, "send", "--to", "b", "--id", rid, "--json", "-", input=TEXT, env=a)
        assert r.code == 0, r.err
        before = _snapshot(home)
        # as after any relay command: the last connection removed -wal and -shm, so every
        # committed page is in relay.db (a read-only open must not rely on a leftover WAL)
        checkpoint = sqlite3.connect(home / "relay.db")
        checkpoint.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        checkpoint.close()
        out["side_files"] = sorted(f.name for f in home.iterdir() if f.name != "relay.db")
        if out["side_files"]:
            out["problems"].append(f"left before the remount: {out['side_files']}")
        p = subprocess.run(["mount", "-o", "remount,ro", str(mnt)], capture_output=True, text=True)
        if p.returncode != 0:
            raise MountUnavailable(f"remount,ro is not allowed here: {p.stderr.strip()}")
        try:
            probe = mnt / "probe"
            try:
                probe.write_text("x")
                out["problems"].append("the file system is still writable")
            except OSError:
                pass
            results = {}
            for name, args, inp in (
                ("send", ("send", "--to", "b", "--id", new_id(), "--json", "-"), TEXT),
                ("send_retry", ("send", "--to", "b", "--id", rid, "--json", "-"), TEXT),
                ("show", ("show", rid, "--json"), None),
                ("list", ("list", "--json"), None),
                ("sweep", ("sweep", "--json"), None),
                ("list_due", ("list", "--json"), None),  # with the request's TTL passed
            ):
                env = {**a, "RELAY_TIME_OFFSET": "7200"} if name == "list_due" else a
                r = relay(home, *args, input=inp, env=env)
                results[name] = {"exit": r.code, "error": r.error_code}
                if "Traceback" in r.err:
                    out["problems"].append(f"{name}: traceback")
                if r.code not in (0, 7):
                    out["problems"].append(f"{name}: exit {r.code} {r.err[-200:]}")
            if results["send"] != {"exit": 7, "error": "storage_error"}:
                out["problems"].append(f"send on a read-only dir: {results['send']}")
            for name in ("show", "list", "sweep"):
                if results[name]["exit"] != 0:
                    out["problems"].append(f"{name} on a read-only dir: {results[name]}")
            if results["list_due"] != {"exit": 7, "error": "storage_error"}:
                # a due expiry must be written before anything is shown: refused, not stale
                out["problems"].append(f"list with a due transition: {results['list_due']}")
            out["results"] = results
        finally:
            subprocess.run(["mount", "-o", "remount,rw", str(mnt)], capture_output=True)
        if _snapshot(home) != before:
            out["problems"].append("the database changed")
        out["problems"] += check_db(home, {rid})
    return out


HOLDER = r"""
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
db.execute("ROLLBACK")
print("released", flush=True)
"""


def busy(hold_extra: float = 0.5) -> dict:
    """Another process holds BEGIN IMMEDIATE past the 5 s busy timeout: busy (75), then the
    retry succeeds once the lock is gone."""
    out: dict = {"problems": []}
    home = Path(tempfile.mkdtemp(prefix="relay-busy-")) / "home"
    a = join(home, "a")
    join(home, "b")
    before = _snapshot(home)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(home / "relay.db")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        rid = new_id()
        r = relay(home, "send", "--to", "b", "--id", rid, "--json", "-", input=TEXT, env=a)
        out["busy"] = {"exit": r.code, "seconds": round(r.seconds, 2)}
        err = json.loads(r.err.strip().splitlines()[-1])["error"] if r.err.strip() else {}
        out["busy"].update({"error": err.get("code"), "retryable": err.get("retryable")})
        if (r.code, err.get("code"), err.get("retryable")) != (75, "busy", True):
            out["problems"].append(f"expected busy/75/retryable, got {out['busy']} {r.err}")
        if r.seconds < 4.5:
            out["problems"].append(f"gave up after {r.seconds:.2f} s, before the 5 s timeout")
    finally:
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(10)
    if _snapshot(home) != before:
        out["problems"].append("a busy send changed the database")
    r = relay(home, "send", "--to", "b", "--id", rid, "--json", "-", input=TEXT, env=a)
    out["retry"] = {"exit": r.code, "duplicate": r.json.get("duplicate") if r.code == 0 else None}
    if r.code != 0 or r.json["duplicate"] is not False:
        out["problems"].append(f"retry after the lock went: {r.code} {r.err[-200:]}")
    out["problems"] += check_db(home, {rid})
    cleanup(home, out["problems"])
    return out


WRITER = r"""
import os, sqlite3, sys, uuid
sys.argv = sys.argv[:1] + sys.argv[1:]
from relay_cli.cli import run
home = os.environ["RELAY_HOME"]
# keep one connection open so a closing command is never the last one (no checkpoint on
# close) and turn the automatic checkpoint off on it: the commits stay in relay.db-wal
keep = sqlite3.connect(os.path.join(home, "relay.db"))
keep.execute("PRAGMA wal_autocheckpoint = 0")
keep.execute("SELECT count(*) FROM requests").fetchone()
n = int(sys.argv[1])
sys.stdout = open(os.devnull, "w")
for i in range(n):
    rid = str(uuid.uuid4())
    sys.stdin = open(os.devnull)
    code = run(["send", "--to", "b", "--id", rid, "--json", f"wal test {i}"])
    if code == 0:
        os.write(1, (rid + "\n").encode())
os.write(1, b"done\n")
import time
time.sleep(600)
"""


def wal_recovery(n: int = 30) -> dict:
    """Kill a writer (SIGKILL) after n committed sends with its commits still only in the
    -wal file; the next open must recover every one of them."""
    out: dict = {"problems": []}
    home = Path(tempfile.mkdtemp(prefix="relay-wal-")) / "home"
    a = join(home, "a")
    join(home, "b")
    env = base_env(home, {**a, "RELAY_RATE_LIMIT": "0"})
    p = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(n)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    ids = []
    for line in p.stdout:
        line = line.strip()
        if line == "done":
            break
        ids.append(line)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    wal = home / "relay.db-wal"
    out["committed_before_kill"] = len(ids)
    out["wal_bytes_after_kill"] = wal.stat().st_size if wal.exists() else 0
    if len(ids) != n:
        out["problems"].append(f"writer committed {len(ids)} of {n}: {p.stderr.read()[-300:]}")
    if not out["wal_bytes_after_kill"]:
        out["problems"].append("no -wal file was left behind (nothing to recover)")
    # the main file alone does not have them: they live only in the WAL
    main_only = Path(tempfile.mkdtemp(prefix="relay-wal-main-")) / "relay.db"
    main_only.write_bytes((home / "relay.db").read_bytes())
    db = sqlite3.connect(main_only)
    in_main = db.execute("SELECT count(*) FROM requests").fetchone()[0]
    db.close()
    out["requests_in_main_file_alone"] = in_main
    r = relay(home, "list", "--all", "--json")
    if r.code != 0:
        out["problems"].append(f"list after the kill: {r.err[-300:]}")
    else:
        seen = {x["id"] for x in r.json["requests"]}
        missing = set(ids) - seen
        out["recovered"] = len(set(ids) & seen)
        if missing:
            out["problems"].append(f"{len(missing)} committed requests lost")
    out["problems"] += check_db(home, set(ids))
    cleanup(home, out["problems"])
    shutil.rmtree(main_only.parent, ignore_errors=True)
    return out


def run_all(log=print) -> dict:
    res = {}
    for name, fn in (
        ("full_disk", full_disk),
        ("read_only", read_only),
        ("busy", busy),
        ("wal_recovery", wal_recovery),
    ):
        t0 = time.perf_counter()
        try:
            res[name] = fn()
        except MountUnavailable as e:
            res[name] = {"skipped": str(e), "problems": []}
        res[name]["seconds"] = round(time.perf_counter() - t0, 1)
        log(f"{name}: " + json.dumps(res[name]))
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench faults")
    ap.parse_args(argv)
    print_machine()
    res = run_all()
    return 1 if any(v["problems"] for v in res.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
