"""The harness's scenarios (docs/e2e.md; design.md §12), each on every runtime it applies to.

A scenario gets a fresh Sandbox (throwaway HOME, relay state dir, scripted model), drives
the real runtime, and asserts on the model's logged request bodies and relay's tables
(``relay show ID --json``, ``relay peers list --json``). It returns facts (numbers,
hook events); an AssertionError is a failure.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

from . import tokens
from .harness import SETTINGS, Sandbox

PEER = {
    "claude": "claude-1",
    "codex": "codex-1",
    "gemini": "gemini-1",
    "opencode": "opencode-1",
    "copilot": "copilot-1",
}
CHECK = "Please check for relay work and finish it."
# the first words of relay's session-start context (relay_cli/agents/guide.py short_text)
START_CONTEXT = "relay: this session is relay peer"


def _ctx(sb: Sandbox, runtime: str, variant: str = "") -> dict:
    sb.configure()
    flags = ("--wake",) if variant == "wake" else ()
    sb.install_hooks(runtime, *flags)
    sender = sb.join("sender", "script")
    sb.relay("peers", "add", PEER[runtime], "--kind", runtime)
    return sender


def _run(sb: Sandbox, runtime: str, prompt: str, timeout: float = 60, **kw) -> dict:
    """The documented start: Claude Code names the peer (its hooks have an env file);
    Codex, Gemini CLI and opencode run under `relay run` (design.md §12)."""
    if runtime == "claude":
        return sb.headless(
            "claude", prompt, env={"RELAY_PEER": PEER[runtime]}, timeout=timeout, **kw
        )
    return sb.headless(runtime, prompt, timeout=timeout, relay_run=PEER[runtime], **kw)


def _turn_texts(sb: Sandbox) -> list[str]:
    return [json.dumps(i["body"]) for i in sb.model.log.model_turns()]


def _first_turn_naming(sb: Sandbox, rid: str) -> int | None:
    """The first model request whose newest part (a prompt, a hook's context, a Stop
    reason, a waiter's note) named ``rid`` with how to claim it: the script claimed it."""
    for n, claimed in sb.model.log.claims():
        if rid.startswith(claimed) or claimed.startswith(rid[:8]):
            return n
    return None


def _claims(item: dict, rid: str) -> bool:
    step = item.get("step")
    return (
        item["kind"] == "turn"
        and bool(step)
        and step[0] == "shell"
        and step[1].startswith(f"relay claim --id {rid[:8]}")
    )


def _announced_once(sb: Sandbox, facts: dict) -> None:
    """No request id reached one model request in two of relay's texts (design.md §18):
    what relay's texts cost there is kept for `python -m bench tokens` (e2e/tokens.py).
    One text the runtime itself sent twice (Claude Code sends a Stop block's reason as
    two messages) is counted, not failed."""
    sb.token_facts = tokens.analyse(sb)
    twice = [d for d in sb.token_facts["ids_twice"] if d["by"] == "relay"]
    facts["ids_twice"] = sb.token_facts["ids_twice"]
    assert twice == [], f"relay named a request twice in one model request: {twice}"


def _expect_state(sb: Sandbox, rid: str, *states: str) -> dict:
    req = sb.show(rid)
    assert req["state"] in states, (
        f"request {rid[:8]} is {req['state']}, want {states}: {json.dumps(req)[:600]}"
    )
    return req


def _ended(r: dict, what: str) -> None:
    """A headless run must end by itself (nothing waits for relay in the foreground)."""
    assert r["code"] == 0, f"{what}: the run did not end cleanly: {_brief(r)}"


def _brief(r: dict) -> dict:
    return {
        "code": r["code"],
        "secs": round(r["secs"], 2),
        "err_tail": r["err"][-400:] if r["code"] != 0 else "",
    }


# ---------------------------------------------------------------- (a) queued before start


def queued_before_start(sb: Sandbox, runtime: str, variant: str = "") -> dict:
    sender = _ctx(sb, runtime, variant)
    rid = sb.send(sender, PEER[runtime], "please say hello")
    r = _run(sb, runtime, CHECK)
    facts = {"run": _brief(r), "turns": len(sb.model.log.model_turns())}
    n = _first_turn_naming(sb, rid)
    facts["announced_in_turn"] = n
    assert n is not None, f"no model request named `relay claim --id {rid[:8]}`; run {r}"
    first = _turn_texts(sb)[0]
    # the SessionStart context itself reached the model (Copilot CLI reads only a
    # top-level additionalContext: design.md §12), not only the Stop block's reason
    facts["start_context_reached_model"] = START_CONTEXT in first
    if runtime == "copilot":
        assert facts["start_context_reached_model"], f"no SessionStart context: {first[:800]}"
        assert n == 0, f"the first model request did not name {rid[:8]} (turn {n})"
    req = _expect_state(sb, rid, "completed")
    facts["state"] = req["state"]
    _ended(r, f"claimed and completed {rid[:8]}, but")
    _announced_once(sb, facts)
    return facts


# ---------------------------------------------------------------- (b) arrives mid-turn


def arrives_mid_turn(sb: Sandbox, runtime: str, variant: str = "") -> dict:
    sender = _ctx(sb, runtime, variant)
    send = (
        f"RELAY_PEER=sender RELAY_SESSION={sender['RELAY_SESSION']} "
        f"relay send --to {PEER[runtime]} 'arrived mid-turn'"
    )
    r = _run(sb, runtime, f"E2E-RUN: {send}")
    rows = sb.relay_json("list")["requests"]
    assert rows, f"the model's send did not run; run {r}"
    rid = rows[0]["id"]
    facts = {"run": _brief(r), "turns": len(sb.model.log.model_turns())}
    n = _first_turn_naming(sb, rid)
    facts["announced_in_turn"] = n
    assert n is not None, f"the Stop/AfterAgent block never named {rid[:8]}; run {r}"
    assert n >= 2, f"named in turn {n}, before the send ran"
    req = _expect_state(sb, rid, "completed")
    facts["state"] = req["state"]
    _ended(r, f"claimed and completed {rid[:8]}, but")
    _announced_once(sb, facts)
    return facts


# ---------------------------------------------------------------- (c) what hooks cost


def _noop_hook_s(sb: Sandbox, runtime: str, rounds: int = 3) -> float:
    """How long one `relay hook RUNTIME` takes on this machine now, with no identity (a
    Stop event; nothing to do): the unit the generous limit below scales with."""
    name = {"gemini": "AfterAgent"}.get(runtime, "Stop")
    ev = json.dumps(
        {
            "session_id": "e2e-noop",
            "transcript_path": "/dev/null",
            "cwd": "/",
            "hook_event_name": name,
            "stop_hook_active": False,
        }
    )
    out = []
    for _ in range(rounds):
        t0 = time.monotonic()
        sb.relay("hook", runtime, input=ev, env={"RELAY_PEER": None, "RELAY_SESSION": None})
        out.append(time.monotonic() - t0)
    return statistics.median(out)


def hook_cost(sb: Sandbox, runtime: str, variant: str = "", rounds: int = 3) -> dict:
    """What relay's hooks add to a headless run: without a peer (someone not using relay)
    and with a peer but nothing queued. The limit is 1 s (design.md §12); on a loaded
    machine it is scaled with what one no-op `relay hook` takes there (the runtime runs
    about four of them one after another), and the numbers are printed either way."""
    sb.configure()
    plain = "Say hello."

    settings = sb.home / SETTINGS[runtime]
    plain_settings = settings.read_text() if settings.exists() else None
    sb.install_hooks(runtime)
    hooked = settings.read_text()
    sb.relay("peers", "add", PEER[runtime], "--kind", runtime)
    noop = _noop_hook_s(sb, runtime)
    limit = max(1.0, 5 * noop)
    facts = {"noop_hook_s": round(noop, 3), "limit_s": round(limit, 2)}
    base, nopeer, withpeer = [], [], []
    hook_secs = 0.0
    # interleaved, so a change in the machine's load hits all three alike
    for _ in range(rounds):
        if plain_settings is None:
            settings.unlink()
        else:
            settings.write_text(plain_settings)
        for label, into, peer in (
            ("without hooks", base, False),
            ("with hooks, no peer", nopeer, False),
            ("with hooks and a peer", withpeer, True),
        ):
            if label == "with hooks, no peer":
                settings.write_text(hooked)
            n0 = len(sb.hook_events())
            r = (
                _run(sb, runtime, plain, timeout=40)
                if peer
                else sb.headless(runtime, plain, timeout=40)
            )
            assert r["code"] == 0, f"{label}: run failed: {_brief(r)}; {facts}"
            into.append(r["secs"])
            if label == "with hooks, no peer":
                hook_secs += sum(e["secs"] or 0 for e in sb.hook_events()[n0:])
    facts.update(
        without_hooks_s=[round(t, 2) for t in base],
        hooks_no_peer_s=[round(t, 2) for t in nopeer],
        hooks_peer_s=[round(t, 2) for t in withpeer],
        hook_process_secs_no_peer=round(hook_secs / rounds, 2),
    )
    m0, m1, m2 = (statistics.median(x) for x in (base, nopeer, withpeer))
    facts["overhead_no_peer_s"] = round(m1 - m0, 2)
    facts["overhead_peer_s"] = round(m2 - m0, 2)
    assert m1 - m0 < limit, f"hooks cost a run without a peer {m1 - m0:.2f} s: {facts}"
    # with a peer: joining, leaving (and for Codex/Gemini the launcher)
    assert m2 - m0 < limit + 2.0, f"a run with a peer, nothing queued, was held up: {facts}"
    return facts


# ---------------------------------------------------------------- (f) a session that ends


def session_end_leaves(sb: Sandbox, runtime: str, variant: str = "") -> dict:
    sender = _ctx(sb, runtime, variant)
    rid = sb.send(sender, PEER[runtime], "claim me, then the session ends")
    r = _run(sb, runtime, f"{CHECK} E2E-NOREPLY")
    facts = {"run": _brief(r)}
    assert _first_turn_naming(sb, rid) is not None, f"never announced; run {r}"
    req = _expect_state(sb, rid, "delivery_unknown")
    facts["state"], facts["reason"] = req["state"], req.get("reason") or req.get("state_reason")
    peers = {p["name"]: p for p in sb.relay_json("peers", "list")["peers"]}
    facts["peer_active_after"] = peers.get(PEER[runtime], {}).get("active")
    assert not peers.get(PEER[runtime], {}).get("active"), f"still active: {peers}"
    _ended(r, "the session left, but")
    return facts


# ---------------------------------------------------------------- TUIs under tmux


class Tui:
    """A runtime's TUI in tmux (80x24) on a socket of its own."""

    def __init__(self, sb: Sandbox, name: str, argv: list[str], env: dict):
        self.sb, self.name = sb, name
        self.sock = str(sb.dir / f"tmux-{name}")
        script = sb.dir / f"start-{name}.sh"
        lines = ["#!/bin/bash"] + [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
        lines += [f"cd {shlex.quote(str(sb.work))}", "exec " + shlex.join(argv)]
        script.write_text("\n".join(lines) + "\n")
        script.chmod(0o755)
        subprocess.run(
            [
                "tmux",
                "-S",
                self.sock,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-x",
                "80",
                "-y",
                "24",
                "-s",
                name,
                str(script),
            ],
            check=True,
            env={"PATH": os.environ["PATH"], "TERM": "xterm-256color", "HOME": str(sb.home)},
        )

    def screen(self) -> str:
        r = subprocess.run(
            ["tmux", "-S", self.sock, "capture-pane", "-p", "-t", self.name],
            capture_output=True,
            text=True,
        )
        return r.stdout

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "-S", self.sock, "send-keys", "-t", self.name, *keys], check=True)

    def type(self, text: str) -> None:
        subprocess.run(
            ["tmux", "-S", self.sock, "send-keys", "-t", self.name, "-l", text], check=True
        )
        time.sleep(0.3)
        self.keys("Enter")

    def wait_screen(self, needle: str, timeout: float = 30) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if needle in self.screen():
                return True
            time.sleep(0.2)
        return False

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], capture_output=True)


def _wait(pred, timeout: float, step: float = 0.1):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return None


def _waiter_ready(sb: Sandbox, peer: str) -> bool:
    peers = {p["name"]: p for p in sb.relay_json("peers", "list")["peers"]}
    return peers.get(peer, {}).get("wakeup") == "waiter"


def start_tui(sb: Sandbox, runtime: str, peer: str, model_turns_before: int = 0) -> Tui:
    """Start the TUI the documented way and bring it to idle with its waiter running."""
    prog = sb.progs[runtime]
    if runtime == "claude":
        tui = Tui(sb, peer, [*prog, "--dangerously-skip-permissions"], sb.env(RELAY_PEER=peer))
        if not _wait(lambda: _waiter_ready(sb, peer), 40, 0.3):
            raise AssertionError(f"Claude Code's waiter never ran; screen:\n{tui.screen()}")
        return tui
    if runtime == "opencode":
        tui = Tui(
            sb,
            peer,
            [str(sb.bin / "relay"), "run", "--as", peer, "--kind", runtime, "--", *prog],
            sb.env(),
        )
        if not tui.wait_screen("Ask anything", 60):
            raise AssertionError(f"opencode's TUI never became ready; screen:\n{tui.screen()}")
        time.sleep(1)
        # opencode's session (and so its waiter) starts at the first prompt
        tui.type(f"I am {peer}. E2E-RUN: echo PEER=$RELAY_PEER")
        if not _wait(lambda: _waiter_ready(sb, peer), 60, 0.3):
            raise AssertionError(f"opencode's waiter never ran; screen:\n{tui.screen()}")
        return tui
    argv = [
        str(sb.bin / "relay"),
        "run",
        "--as",
        peer,
        "--kind",
        "codex",
        "--",
        *prog,
        "--dangerously-bypass-hook-trust",
    ]
    tui = Tui(sb, peer, argv, sb.env())
    time.sleep(3)
    # Codex's SessionStart (and so its waiter) fires only at the first prompt
    tui.type(f"I am {peer}. E2E-RUN: echo PEER=$RELAY_PEER THREAD=$CODEX_THREAD_ID")
    if not _wait(lambda: _waiter_ready(sb, peer), 40, 0.3):
        raise AssertionError(f"Codex's waiter never ran; screen:\n{tui.screen()}")
    return tui


def wake_once(sb: Sandbox, sender: dict, peer: str, timeout: float = 30, send=None) -> dict:
    """Send one request to an idle TUI; time send -> the model request that names it
    (the script answers it with the claim), and wait until the model replied.

    ``send(peer) -> (id, commit time)`` on the monotonic clock; by default a `relay send`
    process, whose commit lies between its start and its exit (``wake_s`` counts from
    the exit, ``wake_upper_s`` from the start)."""
    start = len(sb.model.log.items)
    t0 = time.monotonic()
    if send:
        rid, t1 = send(peer)
    else:
        rid = sb.send(sender, peer, "wake up and say hello")
        t1 = time.monotonic()
    item = sb.model.log.wait_for(lambda i: _claims(i, rid), timeout, start)
    assert item is not None, f"no model request named {rid[:8]} within {timeout} s"
    # where the time went: the commit -> the waiter's exit (its wrapper's clock) -> the model
    commit_wall = item["wall"] - (item["t"] - t1)
    ends = [
        e["end"]
        for e in sb.hook_events()
        if "--wake" in e["args"] and e["end"] and commit_wall - 0.05 <= e["end"] <= item["wall"]
    ]
    waiter_s = (min(ends) - commit_wall) if ends else None
    done = _wait(lambda: sb.show(rid).get("state") == "completed", timeout, 0.2)
    assert done, f"woken, but {rid[:8]} was not completed: {sb.show(rid)}"
    return {
        "id": rid,
        "wake_s": item["t"] - t1,
        "wake_upper_s": item["t"] - t0,
        "waiter_s": waiter_s,
    }


def tui_wake(sb: Sandbox, runtime: str, variant: str = "", wakes: int = 1) -> dict:
    sb.configure()
    sb.install_hooks(runtime, *(("--wake",) if runtime == "codex" else ()))
    sender = sb.join("sender", "script")
    peer = f"{runtime}-tui"
    sb.relay("peers", "add", peer, "--kind", runtime)
    tui = start_tui(sb, runtime, peer)
    try:
        lat = []
        for _ in range(wakes):
            _wait(lambda: _waiter_ready(sb, peer), 30, 0.1)
            time.sleep(0.5)  # idle: the model's last turn has ended
            lat.append(wake_once(sb, sender, peer))
        facts = {"wakes": [round(x["wake_s"], 3) for x in lat]}
        _announced_once(sb, facts)
        return facts
    except AssertionError as e:
        raise AssertionError(f"{e}\nscreen:\n{tui.screen()}") from None
    finally:
        tui.close()


def copilot_tui_idle(sb: Sandbox, runtime: str = "copilot", variant: str = "") -> dict:
    """Copilot CLI's TUI under `relay run`: relay cannot wake it while idle (design.md
    §12: no background hooks), so a request sent then waits, unannounced, until the next
    prompt names it; `/exit` runs SessionEnd (reason user_exit) and the peer leaves."""
    sb.configure()
    sb.install_hooks("copilot")
    sender = sb.join("sender", "script")
    peer = "copilot-tui"
    sb.relay("peers", "add", peer, "--kind", "copilot")
    argv = [str(sb.bin / "relay"), "run", "--as", peer, "--kind", "copilot", "--"]
    argv += [*sb.progs["copilot"], "--allow-all-tools", "--no-auto-update"]
    tui = Tui(sb, peer, argv, sb.env())
    facts: dict = {}
    try:
        assert tui.wait_screen("commands", 40), f"the TUI never started:\n{tui.screen()}"
        time.sleep(1)
        start = len(sb.model.log.items)
        tui.type(f"I am {peer}. E2E-RUN: echo PEER=$RELAY_PEER")
        done = sb.model.log.wait_for(
            lambda i: i["kind"] == "turn" and i["step"] and i["step"][0] == "text", 40, start
        )
        assert done, f"the first turn never ended:\n{tui.screen()}"
        first = "\n".join(_turn_texts(sb))
        facts["peer_in_shell"] = "PEER=copilot-tui" in first
        assert facts["peer_in_shell"], f"the shell tool ran without the peer: {first[-600:]}"
        assert START_CONTEXT in first, "no SessionStart context"
        # idle: the turn's Stop hook has run to its end (a request sent before would be
        # named by that Stop's block, which is not a wake)
        stopped = _wait(
            lambda: any(
                e["event"].get("hook_event_name") == "Stop" and e["end"] for e in sb.hook_events()
            ),
            20,
        )
        assert stopped, "the first turn's Stop hook never ended"
        time.sleep(1)
        before = len(sb.model.log.items)
        rid = sb.send(sender, peer, "sent while the TUI is idle")
        time.sleep(6)
        facts["model_requests_while_idle"] = len(sb.model.log.items) - before
        facts["wakeup_while_idle"] = {
            p["name"]: p for p in sb.relay_json("peers", "list")["peers"]
        }[peer]["wakeup"]
        assert facts["model_requests_while_idle"] == 0, "something woke the idle TUI"
        assert facts["wakeup_while_idle"] == "hook", facts
        start = len(sb.model.log.items)
        tui.type(CHECK)
        got = sb.model.log.wait_for(lambda i: _claims(i, rid), 40, start)
        assert got, f"the next prompt never named {rid[:8]}:\n{tui.screen()}"
        ok = _wait(lambda: sb.show(rid).get("state") == "completed", 30, 0.3)
        assert ok, f"claimed but not completed: {sb.show(rid)}"
        tui.type("/exit")
        left = _wait(
            lambda: (
                not {p["name"]: p for p in sb.relay_json("peers", "list")["peers"]}[peer].get(
                    "active"
                )
            ),
            30,
            0.3,
        )
        ends = [
            e["event"].get("reason")
            for e in sb.hook_events()
            if e["event"].get("hook_event_name") == "SessionEnd"
        ]
        facts["session_end_reasons"] = ends
        assert left, f"still active after /exit:\n{tui.screen()}"
        assert ends == ["user_exit"], facts
        return facts
    except AssertionError as e:
        raise AssertionError(f"{e}\nfacts: {facts}\nscreen:\n{tui.screen()}") from None
    finally:
        tui.close()


def copilot_project_hooks(sb: Sandbox, runtime: str = "copilot", variant: str = "") -> dict:
    """`relay hook install copilot --project` writes .github/hooks/relay.json, which
    Copilot CLI's `-p` runs in a folder it trusts (config.json trustedFolders) and skips,
    silently, in one it does not."""
    sb.configure()
    path = f"{os.path.dirname(sb.real_relay)}:/usr/local/bin:/usr/bin:/bin"
    sb.relay("hook", "install", "copilot", "--project", env={"PATH": path})
    assert (sb.work / ".github/hooks/relay.json").exists(), "not written in the project"
    sender = sb.join("sender", "script")
    sb.relay("peers", "add", PEER[runtime], "--kind", runtime)
    facts = {}
    config = sb.home / ".copilot" / "config.json"
    for trusted in (False, True):
        if not trusted:
            config.write_text(json.dumps({"trustedFolders": []}))
        else:
            sb.configure()
        n0 = len(sb.hook_events())
        rid = sb.send(sender, PEER[runtime], "please say hello")
        r = _run(sb, runtime, CHECK)
        _ended(r, "the run")
        label = "trusted" if trusted else "untrusted"
        facts[label] = {
            "hook_events": [e["event"].get("hook_event_name") for e in sb.hook_events()[n0:]],
            "state": sb.show(rid)["state"],
        }
        if trusted:
            assert facts[label]["state"] == "completed", facts
        else:
            assert facts[label] == {"hook_events": [], "state": "queued"}, facts
            sb.relay("cancel", rid, env=sender)
    return facts


# ---------------------------------------------------------------- (e) two Codex peers


def codex_two_peers(sb: Sandbox, runtime: str = "codex", variant: str = "") -> dict:
    sb.configure()
    sb.install_hooks("codex")
    sender = sb.join("sender", "script")
    for p in ("codex-a", "codex-b"):
        sb.relay("peers", "add", p, "--kind", "codex")
    tuis = []
    # Codex's shared app-server daemon, started from codex-a's environment, as codex-a's
    # TUI would start it (it keeps that environment and outlives the TUI)
    daemon = subprocess.run(
        [
            str(sb.bin / "relay"),
            "run",
            "--as",
            "codex-a",
            "--kind",
            "codex",
            "--",
            *sb.progs["codex"],
            "app-server",
            "daemon",
            "start",
        ],
        env=sb.env(),
        cwd=sb.work,
        capture_output=True,
        text=True,
        timeout=60,
    )
    facts = {"daemon_start": daemon.returncode}
    try:
        for p in ("codex-a", "codex-b"):
            argv = [
                str(sb.bin / "relay"),
                "run",
                "--as",
                p,
                "--kind",
                "codex",
                "--",
                *sb.progs["codex"],
                "--dangerously-bypass-hook-trust",
            ]
            tui = Tui(sb, p, argv, sb.env())
            tuis.append(tui)
            time.sleep(3)
            start = len(sb.model.log.items)
            tui.type(f"I am {p}. E2E-RUN: echo PEER=$RELAY_PEER")

            def ran(i, p=p):
                text = json.dumps(i["body"])
                return (
                    i["kind"] == "turn"
                    and f"I am {p}" in text
                    and "function_call_output" in text
                    and "PEER=" in text.split(f"I am {p}")[-1]
                )

            got = sb.model.log.wait_for(ran, 40, start)
            assert got, f"{p}'s first turn never ran; screen:\n{tui.screen()}"
        for p in ("codex-a", "codex-b"):
            bodies = [
                json.dumps(i["body"])
                for i in sb.model.log.model_turns()
                if f"I am {p}" in json.dumps(i["body"])
            ]
            seen = {m for b in bodies for m in re.findall(r"PEER=([a-z][a-z0-9-]*)", b)}
            facts[p] = sorted(seen)
            assert seen == {p}, f"{p}'s shell commands ran as {sorted(seen)}"
        # a request for codex-b is announced to codex-b and claimed by codex-b
        rid = sb.send(sender, "codex-b", "for codex-b only")
        start = len(sb.model.log.items)
        tuis[1].type(f"I am codex-b. {CHECK}")
        got = sb.model.log.wait_for(lambda i: _claims(i, rid), 30, start)
        assert got, "the request for codex-b was never announced to codex-b"
        assert "I am codex-b" in json.dumps(got["body"]), "claimed in another conversation"
        leaked = [
            i
            for i in sb.model.log.model_turns()
            if rid in json.dumps(i["body"]) and "I am codex-a" in json.dumps(i["body"])
        ]
        assert not leaked, "codex-a's conversation heard of codex-b's request"
        peers = {p["name"]: p for p in sb.relay_json("peers", "list")["peers"]}
        facts["sessions"] = {p: peers[p].get("session_id") for p in ("codex-a", "codex-b")}
        assert facts["sessions"]["codex-a"] != facts["sessions"]["codex-b"]
        done = _wait(lambda: sb.show(rid).get("state") == "completed", 30, 0.3)
        req = sb.show(rid)
        facts["request"] = {k: req.get(k) for k in ("state", "to")}
        assert done, f"codex-b's request: {req}"
        return facts
    finally:
        for t in tuis:
            t.close()


# ---------------------------------------------------------------- what each agent is doing


NOTIFIER = '#!/bin/sh\nenv | grep "^RELAY_ALERT_" > "$(mktemp "{out}/alert.XXXXXX")"\n'


def _alerting(sb: Sandbox) -> Path:
    """`relay notify set` as a person runs it, with a command that keeps each alert's
    facts in a file of its own; returns where those files go."""
    out = sb.dir / "alerts"
    out.mkdir()
    script = sb.dir / "notify.sh"
    script.write_text(NOTIFIER.format(out=out))
    script.chmod(0o755)
    sb.relay("notify", "set", "--", str(script))
    return out


def _alerts(out: Path) -> list[dict]:
    runs = []
    for f in sorted(out.glob("alert.*"), key=lambda f: f.stat().st_mtime_ns):
        runs.append(dict(ln.split("=", 1) for ln in f.read_text().splitlines() if "=" in ln))
    return runs


def _activity(sb: Sandbox, peer: str) -> dict:
    return {p["name"]: p for p in sb.relay_json("peers", "list")["peers"]}.get(peer, {})


def _watch(sb: Sandbox, wanted: str, prefix: list[str] | None = None, env=None) -> str:
    """`relay watch` as the person runs it, in tmux at 80x24 (on another host with
    ``prefix``): the screen once ``wanted`` shows."""
    argv = [*(prefix or []), sb.real_relay, "watch"]
    tui = Tui(sb, "watch", argv, sb.env(**(env or {})))
    try:
        tui.wait_screen(wanted, 20)
        time.sleep(0.5)
        return tui.screen()
    finally:
        tui.close()


def _needs_you_row(screen: str, peer: str, activity: str) -> str:
    """The "needs you" section's row of ``peer``: it fits 80 columns and says what the
    agent needs."""
    lines = screen.rstrip("\n").split("\n")
    assert len(lines) <= 24 and all(len(ln) <= 80 for ln in lines), screen
    assert any(ln.startswith("needs you (1)") for ln in lines), screen
    rows = [ln for ln in lines if ln.startswith(f"  {peer[:8]}")]
    assert rows and activity in rows[0], f"no {activity} row for {peer}:\n{screen}"
    return rows[0].rstrip()


# How each TUI is started without leave to run tools, and how a person allows one.
def _tui_argv(sb: Sandbox, runtime: str, peer: str) -> tuple[list[str], dict]:
    prog = sb.progs[runtime]
    if runtime == "claude":  # its default mode is auto mode, which asks nobody
        return [*prog, "--permission-mode", "default"], sb.env(RELAY_PEER=peer)
    extra = {
        "codex": ["--dangerously-bypass-hook-trust"],
        "gemini": ["--model", "gemini-2.5-flash"],
        "opencode": [],
        "copilot": ["--no-auto-update"],
    }[runtime]
    argv = [str(sb.bin / "relay"), "run", "--as", peer, "--kind", runtime, "--", *prog, *extra]
    return argv, sb.env()


def _asking_config(sb: Sandbox, runtime: str) -> None:
    """Settings under which the runtime asks a person before a shell command runs."""
    if runtime == "codex":  # a command that asks to leave the sandbox (E2E-ASK) is put to one
        c = sb.home / ".codex" / "config.toml"
        c.write_text(
            c.read_text()
            .replace('approval_policy = "never"', 'approval_policy = "on-request"')
            .replace('sandbox_mode = "danger-full-access"', 'sandbox_mode = "read-only"')
        )
    if runtime == "opencode":
        c = sb.home / ".config" / "opencode" / "opencode.json"
        doc = json.loads(c.read_text())
        doc["permission"]["bash"] = "ask"
        c.write_text(json.dumps(doc, indent=2))


READY = {  # what each TUI shows once it takes a prompt
    "codex": "Ask Codex",
    "gemini": "Type your message",
    "opencode": "Ask anything",
    "copilot": "commands",
}


def _start_asking_tui(sb: Sandbox, runtime: str, peer: str) -> Tui:
    argv, env = _tui_argv(sb, runtime, peer)
    tui = Tui(sb, peer, argv, env)
    if runtime == "claude":
        ok = _wait(lambda: _waiter_ready(sb, peer), 60, 0.3)
    else:
        ok = tui.wait_screen(READY[runtime], 90)
    if not ok:
        raise AssertionError(f"{runtime}'s TUI never became ready:\n{tui.screen()}")
    time.sleep(2)
    return tui


def asks_permission(sb: Sandbox, runtime: str, variant: str = "") -> dict:
    """The scripted model asks for a shell command in the TUI, which asks the person
    (design.md §19): relay records needs_person (permission) from the runtime's own event,
    the person's `relay watch` at 80x24 opens with that agent under "needs you", exactly
    one alert runs, and once the person allows it the agent moves on (working, then idle
    where relay hears the answer; idle at the turn's end where it does not)."""
    sb.configure()
    _asking_config(sb, runtime)
    watch_prefix, watch_env = None, None
    if variant == "postgres":
        watch_prefix, watch_env = _postgres_across_hosts(sb)
    sb.install_hooks(runtime)
    peer = f"{runtime}-tui"
    sb.relay("peers", "add", peer, "--kind", runtime)
    out = _alerting(sb)
    tui = _start_asking_tui(sb, runtime, peer)
    facts: dict = {}
    try:
        tui.type(f"I am {peer}. E2E-ASK E2E-RUN: touch e2e-permitted.txt")
        asked = _wait(lambda: _activity(sb, peer).get("activity") == "needs_person", 90, 0.3)
        p = _activity(sb, peer)
        assert asked, f"no needs_person: {p}\n{tui.screen()}"
        facts["activity"] = {k: p[k] for k in ("activity", "activity_cause", "activity_detail")}
        facts["events"] = _observed(sb)
        assert p["activity_cause"] == "permission", p
        screen = _watch(sb, "needs you", watch_prefix, watch_env)
        facts["watch_row"] = _needs_you_row(screen, peer, "needs_person: permission")
        facts["watch_screen"] = screen.rstrip("\n").split("\n")
        if runtime == "claude":  # its permission_prompt Notification comes ~6 s later
            _wait(lambda: "Notification" in _observed(sb), 15, 0.3)
            assert _activity(sb, peer)["activity_since"] == p["activity_since"]
        time.sleep(1.5)
        runs = _alerts(out)
        facts["alerts_while_asking"] = len(runs)
        assert len(runs) == 1, runs
        assert (runs[0]["RELAY_ALERT_PEER"], runs[0]["RELAY_ALERT_CAUSE"]) == (peer, "permission")
        assert runs[0]["RELAY_ALERT_SINCE"] == p["activity_since"], (runs, p)
        facts["alert_text"] = runs[0]["RELAY_ALERT_TEXT"]
        tui.keys("Enter")  # the first choice of every dialog: allow it once
        done = _wait(lambda: (sb.work / "e2e-permitted.txt").exists(), 60, 0.3)
        assert done, f"the allowed command never ran:\n{tui.screen()}"
        idle = _wait(lambda: _activity(sb, peer).get("activity") == "idle", 60, 0.3)
        assert idle, f"{_activity(sb, peer)}\n{tui.screen()}"
        facts["events"] = _observed(sb)
        facts["alerts"] = len(_alerts(out))
        assert facts["alerts"] == 1, _alerts(out)
        facts["hook_secs"] = {
            e["event"].get("hook_event_name"): e["secs"]
            for e in sb.hook_events()
            if e["event"].get("hook_event_name") in ("PermissionRequest", "Notification")
        }
        return facts
    except AssertionError as e:
        raise AssertionError(f"{e}\nfacts: {facts}\nscreen:\n{tui.screen()}") from None
    finally:
        tui.close()


def _observed(sb: Sandbox) -> list[str]:
    """The events relay only observes that reached it, in order. (A hook still starting has
    an empty event file, read as None: it is counted at a later look, once written.)"""
    seen = [e["event"].get("hook_event_name") for e in sb.hook_events() if e["event"]]
    return [n for n in seen if n not in ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd")]


def turn_fails(sb: Sandbox, runtime: str, variant: str = "") -> dict:
    """The scripted model claims a request, then answers the model request that would reply
    with an error (HTTP 400). Where the runtime reports a failed turn (Claude Code's StopFailure,
    opencode's session.error, Copilot CLI's ErrorOccurred) relay records turn_failed while
    the agent holds the claimed request: watch lists it under "needs you" and exactly one
    alert runs for it (in the TUI: a headless run ends its session with the turn). Where
    it reports none (Codex, Gemini CLI, headless) relay never says turn_failed -- it
    cannot tell -- and the run's end is the one alert: gone, holding the request."""
    sb.configure()
    sb.install_hooks(runtime)
    sender = sb.join("sender", "script")
    peer = PEER[runtime]
    sb.relay("peers", "add", peer, "--kind", runtime)
    out = _alerting(sb)
    sb.model.fail_reply = True
    prompt = CHECK
    facts: dict = {}
    if runtime in ("claude", "opencode", "copilot"):
        # their TUIs: a headless run ends its session with the failed turn (Claude Code's
        # print mode does not even let its StopFailure hook finish)
        argv, env = _tui_argv(sb, runtime, peer)
        if runtime == "claude":
            argv = [*sb.progs["claude"], "--dangerously-skip-permissions"]
        elif runtime == "copilot":
            argv = [*argv, "--allow-all-tools"]
        tui = Tui(sb, peer, argv, env)
        try:
            if runtime == "claude":
                assert _wait(lambda: _waiter_ready(sb, peer), 60, 0.3), tui.screen()
            else:
                assert tui.wait_screen(READY[runtime], 90), tui.screen()
            time.sleep(2)
            rid = facts["request"] = sb.send(sender, peer, "claim me, then the model fails")
            if runtime != "claude":  # Claude Code's waiter wakes it for the request
                tui.type(prompt)
            failed = _wait(lambda: _activity(sb, peer).get("activity") == "turn_failed", 90, 0.3)
            p = _activity(sb, peer)
            facts["activity"] = {k: p.get(k) for k in ("activity", "activity_detail")}
            facts["events"] = _observed(sb)
            assert failed, f"{p}\n{tui.screen()}"
            assert sb.show(rid)["state"] == "delivered", sb.show(rid)
            screen = _watch(sb, "needs you")
            facts["watch_row"] = _needs_you_row(screen, peer, "turn_failed")
            facts["watch_screen"] = screen.rstrip("\n").split("\n")
            assert rid[:8] in facts["watch_row"], screen
            time.sleep(1.5)
        except AssertionError as e:
            raise AssertionError(f"{e}\nfacts: {facts}\nscreen:\n{tui.screen()}") from None
        finally:
            tui.close()
        runs = _alerts(out)
        facts["alerts"] = [(a["RELAY_ALERT_CAUSE"], a["RELAY_ALERT_HOLDS"]) for a in runs]
        assert facts["alerts"][:1] == [("turn_failed", rid)], runs
        assert [c for c, _ in facts["alerts"]].count("turn_failed") == 1, runs
        return facts
    # headless: Codex and Gemini CLI report no failed turn; the run's end makes the agent
    # gone holding the request
    rid = facts["request"] = sb.send(sender, peer, "claim me, then the model fails")
    r = _run(sb, runtime, prompt, timeout=120)
    facts["run"] = _brief(r)
    _wait(lambda: _alerts(out), 10, 0.3)
    time.sleep(1)
    runs = _alerts(out)
    facts["events"] = _observed(sb)
    facts["alerts"] = [(a["RELAY_ALERT_CAUSE"], a["RELAY_ALERT_HOLDS"]) for a in runs]
    assert _first_turn_naming(sb, rid) is not None, f"never claimed: {facts}"
    assert facts["alerts"] == [("gone", rid)], f"{runtime} reports no failed turn: {runs}"
    return facts


def _postgres_across_hosts(sb: Sandbox) -> tuple[list[str], dict]:
    """A PostgreSQL server on a host of its own: this sandbox (the agents) reaches it
    through a link of its own, the person's `relay watch` from another host (network
    namespace and host name, testsupport/netns.py). Returns the watch's command prefix
    and environment; every relay of the sandbox uses the server (design.md §13)."""
    sys_path = str(Path(__file__).resolve().parent.parent)
    if sys_path not in sys.path:
        sys.path.insert(0, sys_path)
    from testsupport import netns, pgserver

    why = netns.unavailable() or (None if pgserver.bindir() else "no PostgreSQL server")
    if why:
        raise AssertionError(f"PostgreSQL across hosts cannot run here: {why}")
    net = netns.Net(hosts=("person-host",)).up()
    sb.cleanups.append(net.down)
    # this sandbox's own link to the server's namespace: 10.231.9.2 <-> 10.231.9.1
    here, there = f"ra9-{net.tag}", f"rs9-{net.tag}"
    for args in (
        ("link", "add", here, "type", "veth", "peer", "name", there),
        ("link", "set", there, "netns", net.server_ns),
        ("addr", "add", f"{netns.SUBNET}.9.2/24", "dev", here),
        ("link", "set", here, "up"),
        ("-n", net.server_ns, "addr", "add", f"{netns.SUBNET}.9.1/24", "dev", there),
        ("-n", net.server_ns, "link", "set", there, "up"),
    ):
        subprocess.run(["ip", *args], check=True, capture_output=True)
    server = pgserver.Server(listen=f"{net.listen()},{netns.SUBNET}.9.1", netns=net.server_ns)
    server.init().start()
    sb.cleanups.append(server.remove)
    server.execute("CREATE DATABASE relay")
    url = f"postgresql://{pgserver.SUPERUSER}@{netns.SUBNET}.9.1:{server.port}/relay"
    sb.extra_env["RELAY_DATABASE_URL"] = url
    far = f"postgresql://{pgserver.SUPERUSER}@{net.server_addr('person-host')}:{server.port}/relay"
    return net.prefix("person-host"), {"RELAY_DATABASE_URL": far}


# ---------------------------------------------------------------- the table

SCENARIOS = {
    # name: (function, runtimes or (runtime, variant) pairs)
    "queued_before_start": (
        queued_before_start,
        ["claude", "codex", ("codex", "wake"), "gemini", "opencode", "copilot"],
    ),
    "arrives_mid_turn": (arrives_mid_turn, ["claude", "codex", "gemini", "opencode", "copilot"]),
    "hook_cost": (hook_cost, ["claude", "codex", "gemini", "opencode", "copilot"]),
    "session_end_leaves": (
        session_end_leaves,
        ["claude", "codex", "gemini", "opencode", "copilot"],
    ),
    "tui_wake": (tui_wake, ["claude", "codex", "opencode"]),
    "codex_two_peers": (codex_two_peers, ["codex"]),
    "copilot_tui_idle": (copilot_tui_idle, ["copilot"]),
    "copilot_project_hooks": (copilot_project_hooks, ["copilot"]),
    "asks_permission": (
        asks_permission,
        ["claude", "codex", "gemini", "opencode", "copilot", ("claude", "postgres")],
    ),
    "turn_fails": (turn_fails, ["claude", "codex", "gemini", "opencode", "copilot"]),
}


# The cases whose model requests e2e/tokens.py reads for what relay's texts cost there
# (`python -m bench tokens`; docs/e2e.md): one request queued before the start, one that
# arrives mid-turn, one that wakes an idle TUI.
TOKEN_SCENARIOS = ("queued_before_start", "arrives_mid_turn", "tui_wake", "copilot_tui_idle")


def cases(only_scenarios=None, only_runtimes=None):
    for name, (fn, targets) in SCENARIOS.items():
        if only_scenarios and name not in only_scenarios:
            continue
        for t in targets:
            rt, variant = (t, "") if isinstance(t, str) else t
            if only_runtimes and rt not in only_runtimes:
                continue
            yield name, rt, variant, fn


def case_id(name: str, rt: str, variant: str) -> str:
    return f"{name}[{rt}{'+' + variant if variant else ''}]"
