"""What relay's texts cost an agent in tokens (design.md §18; docs/e2e.md), per runtime.

``python -m bench tokens [--relay PATH] [--e2e] [--runtime R]... [--json OUT]``

Offline (always; a few seconds): a throwaway home, `relay hook RUNTIME` fed the runtimes'
own event fixtures (tests/fixtures/), and every text relay hands the agent counted in
o200k_base tokens (testsupport/tokens.py): the session-start context, a prompt's listing,
a Stop block and a wake note for 1 and for 10 queued requests, the output of `relay claim`
for a 16-byte request (besides its text), each `relay guide --for X` (and `--full`). And
whether one request id is announced twice where two texts meet in one model request: the
session-start context then the first prompt's listing; a Stop reason resubmitted as the
next prompt (Gemini CLI, opencode, Copilot CLI) then that prompt's listing; a wake note
then its turn's listing. ``--relay`` measures another relay (say, one built from main).

``--e2e`` also runs the end-to-end harness (python -m e2e; the pinned runtimes, scripted
models) for one request queued before the start, one that arrives mid-turn and one that
wakes an idle TUI, and prints what relay's texts cost as they reached the model, the
runtime's envelope included (e2e/tokens.py), and every model request in which one id
arrived twice. Nothing is asserted; this prints (the budgets are tests: tests/agents/
test_token_budgets.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
RUNTIMES = ("claude", "codex", "gemini", "opencode", "copilot")
EVENT_FILES = {
    "gemini": {
        "SessionStart": "session_start",
        "UserPromptSubmit": "before_agent",
        "Stop": "after_agent",
    },
}
DEFAULT_EVENTS = {
    "SessionStart": "session_start",
    "UserPromptSubmit": "user_prompt_submit",
    "Stop": "stop",
}
ENV_FILE = {"claude": "CLAUDE_ENV_FILE", "codex": "CODEX_ENV_FILE"}
WAKES = ("claude", "codex", "opencode")  # runtimes whose idle session relay can wake
TEXT = "please say hello"  # 16 bytes


def _count(text: str) -> int:
    sys.path.insert(0, str(ROOT))
    from testsupport import tokens

    return tokens.count(text)


def _ids(text: str) -> int:
    """The most times one request id (its first 8 characters) is named in ``text``."""
    import re
    from collections import Counter

    found = Counter(m.group() for m in re.finditer(r"\b[0-9a-f]{8}(?=-)", text))
    return max(found.values(), default=0)


class Home:
    """A throwaway relay home, a peer ``agent`` of one runtime and a peer ``sender``."""

    def __init__(self, relay: str, runtime: str, root: Path) -> None:
        self.relay, self.runtime = relay, runtime
        self.dir = Path(tempfile.mkdtemp(prefix="tokens-", dir=root))
        self.bin = self.dir / "bin"
        self.bin.mkdir()
        self.queued = self.dir / "queued.txt"
        # `codex queue … --message NOTE` (Codex's waiter): keep the note, succeed
        fake = self.bin / "codex"
        fake.write_text(
            '#!/bin/sh\nm=; p=; for a in "$@"; do [ "$p" = --message ] && m="$a"; p="$a"; done\n'
            f'printf %s "$m" > {self.queued}\n'
        )
        fake.chmod(0o755)
        self.base = {
            "PATH": f"{self.bin}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(self.dir),
            "RELAY_HOME": str(self.dir / "relay"),
            "LANG": "C.UTF-8",
        }
        self.sender = self.join("sender")
        self.session_id = str(uuid.uuid4())
        env_var = ENV_FILE.get(runtime)
        if env_var:
            self.agent = {"RELAY_PEER": "agent", env_var: str(self.dir / "env.sh")}
            self.run("peers", "add", "agent", "--kind", runtime)
        else:
            self.agent = self.join("agent", "--kind", runtime)

    def run(self, *args: str, env: dict | None = None, stdin: str | None = None):
        return subprocess.run(
            [self.relay, *args],
            input=stdin,
            capture_output=True,
            text=True,
            env={**self.base, **(env or {})},
            timeout=60,
        )

    def join(self, name: str, *more: str) -> dict:
        r = self.run("peers", "join", name, *more, "--json")
        return {"RELAY_PEER": name, "RELAY_SESSION": json.loads(r.stdout)["token"]}

    def agent_session(self) -> dict:
        """The agent's identity for shell commands (from the env file the hook wrote)."""
        if "RELAY_SESSION" in self.agent:
            return self.agent
        out = {}
        for line in (self.dir / "env.sh").read_text().splitlines():
            k, _, v = line.removeprefix("export ").partition("=")
            out[k] = v.strip("'")
        return {"RELAY_PEER": out["RELAY_PEER"], "RELAY_SESSION": out["RELAY_SESSION"]}

    def queue(self, n: int) -> list[str]:
        ids = []
        for _ in range(n):
            r = self.run("send", "--to", "agent", TEXT, "--json", env=self.sender)
            ids.append(json.loads(r.stdout)["id"])
        return ids

    def event(self, name: str, **changes) -> str:
        files = EVENT_FILES.get(self.runtime, DEFAULT_EVENTS)
        doc = json.loads((FIXTURES / self.runtime / f"{files[name]}.json").read_text())
        doc.update(session_id=self.session_id, **changes)
        return json.dumps(doc)

    def hook(self, name: str, **changes) -> str:
        """The text relay's hook hands the runtime for that event ('' for none)."""
        r = self.run("hook", self.runtime, env=self.agent, stdin=self.event(name, **changes))
        if not r.stdout.strip():
            return ""
        doc = json.loads(r.stdout)
        parts = [
            doc.get("reason"),  # (Claude Code's Stop: a pointer to the context below)
            doc.get("additionalContext"),
            (doc.get("hookSpecificOutput") or {}).get("additionalContext"),
        ]
        return "\n".join(p for p in parts if p)

    def wake(self) -> str:
        """The note relay's waiter wakes an idle session with ('' where there is none)."""
        env = {**self.agent, "CLAUDE_CODE_ENTRYPOINT": "cli", "CLAUDE_CODE_SESSION_ATTENDED": "1"}
        r = self.run(
            "hook", self.runtime, "--wake", "--timeout", "10s", env=env, stdin=self.event("Stop")
        )
        if r.returncode == 2:
            return r.stderr.strip()
        return self.queued.read_text() if self.queued.exists() else ""

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def offline(relay: str, runtimes: list[str]) -> dict:
    root = Path(tempfile.mkdtemp(prefix="relay-bench-tokens-"))
    out: dict = {"runtimes": {}, "claim": None, "guide": {}}

    def home(rt: str) -> Home:
        return Home(relay, rt, root)

    try:
        for rt in runtimes:
            row: dict = {}
            for n in (1, 10):
                h = home(rt)
                start = h.hook("SessionStart")
                if n == 1:
                    row["start"] = _count(start)
                h.queue(n)
                row[f"listing_{n}"] = _count(h.hook("UserPromptSubmit"))
                h.close()
                h = home(rt)
                h.hook("SessionStart")
                h.queue(n)
                row[f"stop_{n}"] = _count(h.hook("Stop"))
                h.close()
                if rt in WAKES:
                    h = home(rt)
                    h.hook("SessionStart")
                    h.queue(n)
                    row[f"wake_{n}"] = _count(h.wake())
                    h.close()
            # where two texts meet in one model request
            h = home(rt)
            h.queue(1)
            first = h.hook("SessionStart") + "\n" + h.hook("UserPromptSubmit")
            row["twice_start_prompt"] = _ids(first)
            h.close()
            h = home(rt)
            h.hook("SessionStart")
            h.queue(1)
            reason = h.hook("Stop")
            again = h.hook("UserPromptSubmit", prompt=reason)
            row["twice_stop_prompt"] = _ids(reason + "\n" + again)
            h.close()
            if rt in WAKES:
                h = home(rt)
                h.hook("SessionStart")
                h.queue(1)
                note = h.wake()
                turn = h.hook("UserPromptSubmit", prompt=note)
                row["twice_wake_prompt"] = _ids(note + "\n" + turn)
                h.close()
            out["runtimes"][rt] = row
        # claim's output for an agent (not a terminal), a 16-byte request
        h = home("claude")
        h.hook("SessionStart")
        (rid,) = h.queue(1)
        r = h.run("claim", "--id", rid, env=h.agent_session())
        printed = r.stdout + r.stderr
        out["claim"] = {"tokens": _count(printed), "besides_text": _count(printed) - _count(TEXT)}
        h.close()
        for audience in ("generic", *RUNTIMES):
            h = home("claude")
            short = h.run("guide", "--for", audience).stdout
            full = h.run("guide", "--for", audience, "--full")
            out["guide"][audience] = {
                "short": _count(short),
                "full": _count(full.stdout) if full.returncode == 0 else None,
            }
            h.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def print_offline(doc: dict) -> None:
    cols = [
        ("start", "start"),
        ("listing_1", "list 1"),
        ("listing_10", "list 10"),
        ("stop_1", "stop 1"),
        ("stop_10", "stop 10"),
        ("wake_1", "wake 1"),
        ("wake_10", "wake 10"),
        ("twice_start_prompt", "id x start+prompt"),
        ("twice_stop_prompt", "x stop+prompt"),
        ("twice_wake_prompt", "x wake+prompt"),
    ]
    print("relay's texts, o200k_base tokens (without the runtime's envelope)")
    print(f"{'runtime':9}" + "".join(f"{h:>9}" for _, h in cols[:7]) + "   an id named (times)")
    for rt, row in doc["runtimes"].items():
        nums = "".join(f"{row.get(k, '-'):>9}" for k, _ in cols[:7])
        twice = " / ".join(str(row.get(k, "-")) for k, _ in cols[7:])
        print(f"{rt:9}{nums}   {twice}  (start+prompt / stop+prompt / wake+prompt)")
    c = doc["claim"]
    print(
        f"claim output for a 16-byte request: {c['tokens']} ({c['besides_text']} besides the text)"
    )
    print(
        "relay guide --for X: "
        + ", ".join(
            f"{a} {g['short']}" + (f" (--full {g['full']})" if g["full"] else "")
            for a, g in doc["guide"].items()
        )
    )


def e2e(relay: str | None, runtimes: list[str], keep_json: str | None) -> dict:
    """Run the harness's token cases; return its results."""
    out = keep_json or os.path.join(tempfile.mkdtemp(prefix="relay-bench-e2e-"), "e2e.json")
    argv = [sys.executable, "-m", "e2e", "--json", out]
    for s in ("queued_before_start", "arrives_mid_turn", "tui_wake", "copilot_tui_idle"):
        argv += ["--scenario", s]
    for rt in runtimes:
        argv += ["--runtime", rt]
    env = dict(os.environ)
    if relay:
        env["RELAY_E2E_RELAY"] = relay
    subprocess.run(argv, cwd=ROOT, env=env, check=False)
    return json.loads(Path(out).read_text())


def print_e2e(doc: dict) -> None:
    print("\nas it reached the model (o200k_base tokens, the runtime's envelope included)")
    print(f"{'case':32}{'1st req':>8}{'share':>7}  relay texts: kind tokens+envelope (xcopies)")
    for res in doc.get("results", []):
        t = res.get("tokens")
        if not t:
            continue
        first = t["first_request"]
        share = f"{100 * first['share']:.1f}%" if first["share"] is not None else "-"
        texts = ", ".join(
            f"{x['kind']} {x['tokens']}+{x['envelope']}"
            + (f" x{x['copies']}" if x.get("copies", 1) > 1 else "")
            for x in t["texts"]
        )
        print(f"{res['case']:32}{first['relay']:>8}{share:>7}  {texts}")
        for c in t["claims"]:
            print(f"{'':47}claim output {c['tokens']} ({c['besides_text']} besides the text)")
        for d in t["ids_twice"]:
            print(
                f"{'':47}model request {d['request']}: {d['id']} arrived {d['times']} times "
                f"(by {d['by']})"
            )
        if not t["ids_twice"]:
            print(f"{'':47}no id arrived twice in one model request")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench tokens", description=__doc__.split("\n\n")[0])
    p.add_argument("--relay", help="the relay program to measure (default: this one)")
    p.add_argument("--runtime", action="append", choices=RUNTIMES, help="only this runtime")
    p.add_argument("--e2e", action="store_true", help="also run the end-to-end harness")
    p.add_argument("--e2e-json", help="keep the harness's results here")
    p.add_argument("--json", help="write the numbers here")
    args = p.parse_args(argv)
    relay = args.relay or shutil.which("relay", path=os.path.dirname(sys.executable))
    if not relay:
        print("relay is not installed next to this Python (--relay PATH)", file=sys.stderr)
        return 2
    runtimes = args.runtime or list(RUNTIMES)
    doc = {"relay": relay, "offline": offline(relay, runtimes)}
    print_offline(doc["offline"])
    if args.e2e:
        doc["e2e"] = e2e(args.relay, runtimes, args.e2e_json)
        print_e2e(doc["e2e"])
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1))
    return 0
