"""The end-to-end harness: the real agent runtimes, relay's hooks, scripted models.

docs/e2e.md says what it proves. Everything runs inside a loopback-only network namespace
(``unshare -n``; ``lo`` brought up), with a throwaway HOME, a throwaway relay state
directory and dummy API keys: no traffic leaves the machine.

The runtimes are the versions pinned in ``e2e/package-lock.json``, installed with
``npm ci`` into ``~/.cache/relay-e2e/<hash of the lock>/`` (outside the work tree) and reused
while the lock is unchanged.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .fake_models import FakeModel

E2E = Path(__file__).resolve().parent
ROOT = E2E.parent
RUNTIMES = ("claude", "codex", "gemini", "opencode", "copilot")
DUMMY = {
    "ANTHROPIC_API_KEY": "sk-ant-e2e-dummy-key-0000000000000000",
    "OPENAI_API_KEY": "sk-e2e-dummy-key-0000000000000000",
    "GEMINI_API_KEY": "e2e-dummy-gemini-key-000000000000",
}


class Missing(Exception):
    """A runtime or npm is not there (the test skips, or fails when CI requires it)."""


# ------------------------------------------------------------------ installing runtimes


def lock_hash(lock_dir: Path = E2E) -> str:
    return hashlib.sha256((lock_dir / "package-lock.json").read_bytes()).hexdigest()[:16]


def cache_root() -> Path:
    base = os.environ.get("RELAY_E2E_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "relay-e2e"
    )
    return Path(base)


def install(lock_dir: Path = E2E, log=print) -> Path:
    """``npm ci`` the lock into the cache (once per lock); return its node_modules."""
    target = cache_root() / lock_hash(lock_dir)
    mods = target / "node_modules"
    if (target / ".complete").exists():
        return mods
    npm = shutil.which("npm")
    if not npm:
        raise Missing("npm is not installed (needed to install the pinned runtimes)")
    tmp = Path(
        tempfile.mkdtemp(
            prefix=".install-", dir=cache_root().mkdir(parents=True, exist_ok=True) or cache_root()
        )
    )
    for name in ("package.json", "package-lock.json"):
        shutil.copy(lock_dir / name, tmp / name)
    log(f"e2e: npm ci into {target}")
    r = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=tmp,
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise Missing(f"npm ci failed: {npm_cause(r.stderr)}")
    (tmp / ".complete").write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    if target.exists():
        shutil.rmtree(target)
    tmp.rename(target)
    return mods


def npm_cause(stderr: str, limit: int = 1500) -> str:
    """What an npm error says went wrong, without the usage text npm prints after a usage
    error (``EUSAGE``: e.g. `npm ci` on a lock out of step with package.json), which
    would otherwise fill the end of its output."""

    def words(line: str) -> str:
        return line.removeprefix("npm error").strip()

    lines = stderr.strip().splitlines()
    for i, line in enumerate(lines):
        if words(line) == "Usage:":
            cut = i - 1  # the command's one-line description stands before "Usage:"
            while cut > 0 and not words(lines[cut]):
                cut -= 1
            lines = [*lines[: max(cut, 0)], *(x for x in lines[i:] if "complete log" in x)]
            break
    text = "\n".join(x for x in lines if words(x))
    return text if len(text) <= limit else text[:limit] + " …"


# Claude Code ships in two npm packages, each with the same `claude` binary in a platform
# package: @anthropic-ai/claude-code (its version is Claude Code's) and
# @anthropic-ai/claude-agent-sdk (its package.json declares the Claude Code it carries,
# ``claudeCodeVersion``). Some releases (2.1.333-2.1.336) came out only in the SDK.
CLAUDE_PACKAGES = {
    "@anthropic-ai/claude-code": ("version", "@anthropic-ai/claude-code-linux-x64/claude"),
    "@anthropic-ai/claude-agent-sdk": (
        "claudeCodeVersion",
        "@anthropic-ai/claude-agent-sdk-linux-x64/claude",
    ),
}


def version_key(v: str) -> tuple:
    """``2.1.336`` -> (2, 1, 336); a part that is not a number sorts first."""
    return tuple(int(p) if p.isdigit() else -1 for p in v.split("-")[0].split("."))


def claude_builds(mods: Path) -> list[dict]:
    """Every Claude Code binary installed: its version, the package and that package's
    own version, the binary."""
    out = []
    for pkg, (field, binary) in CLAUDE_PACKAGES.items():
        meta, exe = mods / pkg / "package.json", mods / binary
        if meta.exists() and exe.exists():
            doc = json.loads(meta.read_text())
            if doc.get(field):
                out.append(
                    {"claude": doc[field], "package": pkg, "version": doc["version"], "exe": exe}
                )
    return out


def claude_build(mods: Path) -> dict | None:
    """The Claude Code the harness runs: the newest installed (the package that ships
    Claude Code itself on a tie), or the package ``RELAY_E2E_CLAUDE`` names."""
    builds = claude_builds(mods)
    want = os.environ.get("RELAY_E2E_CLAUDE")
    if want:
        builds = [b for b in builds if b["package"] == want]
    return max(builds, key=lambda b: version_key(b["claude"]), default=None)


def programs(mods: Path) -> dict[str, list[str]]:
    """The command that starts each runtime. Claude Code's platform binary runs directly
    (npm blocks the postinstall that would link it)."""
    out = {}
    claude = claude_build(mods)
    if claude:
        out["claude"] = [str(claude["exe"])]
    codex = mods / "@openai/codex/bin/codex.js"
    if codex.exists():
        out["codex"] = [shutil.which("node") or "node", str(codex)]
    gemini = mods / "@google/gemini-cli/bundle/gemini.js"
    if gemini.exists():
        out["gemini"] = [shutil.which("node") or "node", str(gemini)]
    # opencode's platform binary (npm blocks the wrapper's postinstall; it is not needed)
    opencode = mods / "opencode-linux-x64/bin/opencode"
    if opencode.exists():
        out["opencode"] = [str(opencode)]
    # GitHub Copilot CLI: the platform package's single executable (the loader in
    # @github/copilot only finds and starts it)
    copilot = mods / "@github/copilot-linux-x64/copilot"
    if copilot.exists():
        out["copilot"] = [str(copilot)]
    return out


def versions(mods: Path) -> dict[str, str]:
    pkgs = {
        "claude": "@anthropic-ai/claude-code",
        "codex": "@openai/codex",
        "gemini": "@google/gemini-cli",
        "opencode": "opencode-ai",
        "copilot": "@github/copilot",
    }
    out = {}
    for rt, pkg in pkgs.items():
        p = mods / pkg / "package.json"
        if p.exists():
            out[rt] = json.loads(p.read_text())["version"]
    claude = claude_build(mods)  # the one programs() runs, which may come from the SDK
    if claude:
        sdk = claude["package"] != "@anthropic-ai/claude-code"
        out["claude"] = claude["claude"] + (
            f" ({claude['package']} {claude['version']})" if sdk else ""
        )
    return out


# ------------------------------------------------------------------ the network namespace


def in_loopback_netns() -> bool:
    """True when the only network interface is lo (a namespace made by ``unshare -n``)."""
    try:
        out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    except OSError:
        return False
    names = [line.split(":")[1].strip() for line in out.splitlines() if ":" in line]
    return names == ["lo"]


def enter_netns() -> None:
    """Run this process in a new loopback-only network namespace (root, Linux): re-exec
    it under ``unshare -n`` unless it already is in one, then bring ``lo`` up."""
    if not in_loopback_netns():
        if os.environ.get("RELAY_E2E_NETNS") == "1":
            raise RuntimeError("unshare -n did not give a loopback-only namespace")
        os.environ["RELAY_E2E_NETNS"] = "1"
        unshare = shutil.which("unshare")
        if not unshare:
            raise Missing("unshare (util-linux) is not installed")
        os.execv(unshare, ["unshare", "-n", "--", sys.executable, *sys.orig_argv[1:]])
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)


# ------------------------------------------------------------------ one sandbox

RELAY_WRAPPER = """#!/bin/bash
# relay, as the runtimes' hooks call it, with every hook event's stdin kept (design.md §12:
# the harness validates each one against the fixtures' schemas), what it wrote (what relay
# handed the runtime: e2e/tokens.py finds it in the model's requests), its start and end.
if [ "$1" = hook ]; then
    f=$(mktemp "{events}/ev.XXXXXXXX")
    cat > "$f"
    {{ printf '%s\\n' "$*"; printf 'entrypoint=%s attended=%s codex_thread=%s peer=%s\\n' \\
        "$CLAUDE_CODE_ENTRYPOINT" "$CLAUDE_CODE_SESSION_ATTENDED" "$CODEX_THREAD_ID" \\
        "$RELAY_PEER"; date +%s.%N; }} > "$f.meta"
    "{relay}" "$@" < "$f" > "$f.out" 2> "$f.err"
    code=$?
    cat "$f.out"
    cat "$f.err" >&2
    {{ date +%s.%N; echo "$code"; }} >> "$f.meta"
    exit $code
fi
exec "{relay}" "$@"
"""


# where `relay hook install RUNTIME` writes, under HOME
SETTINGS = {
    "claude": ".claude/settings.json",
    "codex": ".codex/hooks.json",
    "gemini": ".gemini/settings.json",
    "opencode": ".config/opencode/plugins/relay.js",
    "copilot": ".copilot/hooks/relay.json",
}


NOTE_START = "[relay] "  # how a wake note of relay's starts (announce.OWN_STARTS)


def _codex_user_turns(path: Path) -> list[str]:
    """The text of every user message in one of Codex's thread-history databases."""
    import sqlite3

    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return []
    out = []
    try:
        rows = db.execute(
            "SELECT item_json FROM thread_items WHERE item_type = 'userMessage' "
            "ORDER BY created_at_ms"
        ).fetchall()
        for (doc,) in rows:
            for part in json.loads(doc).get("content") or []:
                if part.get("type") == "text" and isinstance(part.get("text"), str):
                    out.append(part["text"])
    except (sqlite3.Error, ValueError, AttributeError):
        pass
    finally:
        db.close()
    return out


class Sandbox:
    """A throwaway HOME + relay state dir + a fake model, for one scenario."""

    def __init__(self, mods: Path, keep: bool = False):
        # not under /tmp: Codex treats a CODEX_HOME in the temporary directory as a test
        # run (no helper binaries, no shared daemon), and the harness wants its real start
        root = Path(os.environ.get("RELAY_E2E_SANDBOXES") or cache_root() / "sandboxes")
        root.mkdir(parents=True, exist_ok=True)
        self.dir = Path(tempfile.mkdtemp(prefix="run-", dir=root))
        self.home = self.dir / "home"
        self.relay_home = self.dir / "relay"
        self.work = self.dir / "work"
        self.bin = self.home / "bin"
        self.events = self.dir / "events"
        self.tmp = self.dir / "tmp"
        for d in (self.home, self.work, self.bin, self.events, self.tmp):  # relay: its own
            d.mkdir(parents=True)
        # RELAY_E2E_RELAY: another relay to test (e.g. one built from another commit)
        real = (
            os.environ.get("RELAY_E2E_RELAY")
            or shutil.which("relay", path=os.path.dirname(sys.executable))
            or shutil.which("relay")
        )
        if not real:
            raise Missing("relay is not installed next to this Python")
        self.real_relay = real
        w = self.bin / "relay"
        w.write_text(RELAY_WRAPPER.format(events=self.events, relay=real))
        w.chmod(0o755)
        # Codex runs commands in a login shell (`bash -lc`), whose /etc/profile resets PATH
        (self.home / ".bash_profile").write_text(
            f'export PATH="{self.bin}:{os.path.dirname(sys.executable)}:$PATH"\n'
        )
        self.progs = {}
        # each runtime by its own name, as a person starts it (`relay run … -- codex` knows
        # it is Codex by that name; `codex queue`, the Codex waiter's, needs it on PATH).
        # Codex as npm installs it: `codex` is a link to the package's Node script, which
        # starts the native executable (the waiter runs that one itself: wake.py)
        for name, argv in programs(mods).items():
            shim = self.bin / name
            if name == "codex":
                shim.symlink_to(argv[-1])
            else:
                shim.write_text("#!/bin/sh\nexec " + " ".join(f"'{a}'" for a in argv) + ' "$@"\n')
                shim.chmod(0o755)
            self.progs[name] = [str(shim)]
        self.mods = mods
        self.model = FakeModel(self.dir / "model.jsonl")
        self.keep = keep
        self.procs: list[subprocess.Popen] = []
        # variables every process of this sandbox gets besides env()'s own (a scenario's
        # RELAY_DATABASE_URL, design.md §13)
        self.extra_env: dict[str, str] = {}
        self.cleanups: list = []  # called by close(), last first
        subprocess.run(["git", "init", "-q", str(self.work)], check=True)

    # -- environment
    def env(self, **extra) -> dict:
        env = {
            "HOME": str(self.home),
            "PATH": f"{self.bin}:{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin",
            "RELAY_HOME": str(self.relay_home),
            "LANG": "C.UTF-8",
            "TERM": "xterm-256color",
            "TMPDIR": str(self.tmp),
            "USER": "root",
            "SHELL": "/bin/bash",
            # Claude Code
            "ANTHROPIC_BASE_URL": self.model.url,
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
            "IS_SANDBOX": "1",
            # Gemini CLI
            "GOOGLE_GEMINI_BASE_URL": self.model.url,
            "GEMINI_CLI_NO_RELAUNCH": "true",
            "NO_UPDATE_NOTIFIER": "1",
            # Codex
            "CODEX_HOME": str(self.home / ".codex"),
            # opencode (its config: configure())
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_SHARE": "1",
            # GitHub Copilot CLI: bring-your-own-key against the scripted model, no sign-in
            # and no network (`copilot help environment`); its executable unpacks itself
            # once (235 MB) into COPILOT_CACHE_HOME, shared by every sandbox of this lock
            "COPILOT_HOME": str(self.home / ".copilot"),
            "COPILOT_CACHE_HOME": str(self.mods.parent / "copilot-cache"),
            "COPILOT_OFFLINE": "true",
            "COPILOT_PROVIDER_BASE_URL": f"{self.model.url}/v1",
            "COPILOT_PROVIDER_WIRE_API": "responses",
            "COPILOT_PROVIDER_API_KEY": DUMMY["OPENAI_API_KEY"],
            "COPILOT_MODEL": "gpt-4.1",
            **DUMMY,
            **self.extra_env,
        }
        for k, v in extra.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        return env

    def configure(self) -> None:
        """Settings each runtime needs to run offline against the fake model."""
        (self.home / ".claude").mkdir(exist_ok=True)
        key = DUMMY["ANTHROPIC_API_KEY"]
        (self.home / ".claude.json").write_text(
            json.dumps(
                {
                    "hasCompletedOnboarding": True,
                    "theme": "dark",
                    "numStartups": 5,
                    "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []},
                    "projects": {
                        str(self.work): {
                            "hasTrustDialogAccepted": True,
                            "hasCompletedProjectOnboarding": True,
                            "allowedTools": [],
                        }
                    },
                    "bypassPermissionsModeAccepted": True,
                }
            )
        )
        codex = self.home / ".codex"
        codex.mkdir(exist_ok=True)
        (codex / "config.toml").write_text(
            'model = "gpt-e2e"\nmodel_provider = "e2e"\n'
            'approval_policy = "never"\nsandbox_mode = "danger-full-access"\n'
            "check_for_update_on_startup = false\n\n"
            '[model_providers.e2e]\nname = "e2e"\n'
            f'base_url = "{self.model.url}/v1"\nwire_api = "responses"\n'
            'env_key = "OPENAI_API_KEY"\nrequest_max_retries = 0\n'
            "stream_max_retries = 0\n\n"
            f'[projects."{self.work}"]\ntrust_level = "trusted"\n'
            "[analytics]\nenabled = false\n"
        )
        gem = self.home / ".gemini"
        gem.mkdir(exist_ok=True)
        settings = gem / "settings.json"
        doc = json.loads(settings.read_text()) if settings.exists() else {}
        doc.setdefault("security", {}).setdefault("auth", {})["selectedType"] = "gemini-api-key"
        doc["security"].setdefault("folderTrust", {})["enabled"] = False
        doc.setdefault("general", {})["disableAutoUpdate"] = True
        doc["general"]["disableUpdateNag"] = True
        doc.setdefault("privacy", {})["usageStatisticsEnabled"] = False
        doc.setdefault("telemetry", {})["enabled"] = False
        settings.write_text(json.dumps(doc, indent=2))
        (gem / "trustedFolders.json").write_text(json.dumps({str(self.work): "TRUST_FOLDER"}))
        # opencode: a custom OpenAI-compatible provider (bundled in the binary) pointed at
        # the fake model, and an .npmrc with offline=true next to the config: at every
        # start opencode npm-installs @opencode-ai/plugin into its config directory, which
        # offline stalls the start for about a minute without it
        oc = self.home / ".config" / "opencode"
        oc.mkdir(parents=True, exist_ok=True)
        (oc / "opencode.json").write_text(
            json.dumps(
                {
                    "autoupdate": False,
                    "share": "disabled",
                    "model": "fake/fake-model",
                    "permission": {"bash": "allow", "edit": "allow", "external_directory": "allow"},
                    "provider": {
                        "fake": {
                            "npm": "@ai-sdk/openai-compatible",
                            "name": "Fake",
                            "options": {"baseURL": f"{self.model.url}/v1", "apiKey": "e2e-dummy"},
                            "models": {
                                "fake-model": {
                                    "name": "Fake model",
                                    "tool_call": True,
                                    "limit": {"context": 100000, "output": 4096},
                                }
                            },
                        }
                    },
                },
                indent=2,
            )
        )
        (oc / ".npmrc").write_text("offline=true\nfetch-retries=0\n")
        cop = self.home / ".copilot"
        cop.mkdir(exist_ok=True)
        (cop / "config.json").write_text(json.dumps({"trustedFolders": [str(self.work)]}))

    # -- relay
    def relay(
        self, *args: str, env: dict | None = None, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess:
        r = subprocess.run(
            [self.real_relay, *args],
            env=self.env(**(env or {})),
            input=input,
            capture_output=True,
            text=True,
            cwd=self.work,
        )
        if check and r.returncode != 0:
            raise AssertionError(f"relay {' '.join(args)} -> {r.returncode}: {r.stderr}")
        return r

    def relay_json(self, *args: str, env: dict | None = None):
        return json.loads(self.relay(*args, "--json", env=env).stdout)

    def join(self, name: str, kind: str = "script", lease: str = "1h") -> dict:
        doc = self.relay_json("peers", "join", name, "--kind", kind, "--lease", lease)
        return {"RELAY_PEER": name, "RELAY_SESSION": doc["token"]}

    def send(self, sender_env: dict, to: str, text: str = "please say hello") -> str:
        doc = self.relay_json("send", "--to", to, text, env=sender_env)
        return doc.get("id") or doc["request"]["id"]

    def show(self, rid: str) -> dict:
        return self.relay_json("show", rid)

    def install_hooks(self, runtime: str, *flags: str) -> str:
        """`relay hook install` as a person runs it, with the real relay on PATH (so the
        hook commands name a bare `relay`; at run time PATH finds the event-keeping
        wrapper first)."""
        path = (
            f"{os.path.dirname(self.real_relay)}:{os.path.dirname(sys.executable)}:"
            "/usr/local/bin:/usr/bin:/bin"
        )
        out = self.relay("hook", "install", runtime, *flags, env={"PATH": path}).stdout
        text = (self.home / SETTINGS[runtime]).read_text()
        named = 'const RELAY = "relay"' if runtime == "opencode" else '"relay hook'
        assert named in text, f"install named relay by another path: {text[:400]}"
        return out

    # -- runtimes
    def headless(
        self,
        runtime: str,
        prompt: str,
        env: dict | None = None,
        timeout: float = 90,
        relay_run: str | None = None,
        extra: tuple = (),
    ) -> dict:
        """One headless run; returns its exit code, output and wall time."""
        prog = self.progs.get(runtime)
        if not prog:
            raise Missing(f"{runtime} is not installed in {self.mods}")
        if runtime == "claude":
            cmd = [*prog, "-p", prompt, "--dangerously-skip-permissions", *extra]
        elif runtime == "codex":
            cmd = [
                *prog,
                "exec",
                "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox",
                "--dangerously-bypass-hook-trust",
                *extra,
                prompt,
            ]
        elif runtime == "opencode":
            # after `--` the words are the message, joined with spaces; opencode wraps a
            # word that holds a space in double quotes, so the prompt goes word by word
            cmd = [*prog, "run", *extra, "--", *prompt.split(" ")]
        elif runtime == "copilot":
            cmd = [*prog, "-p", prompt, "--allow-all-tools", "--no-auto-update", *extra]
        else:
            cmd = [*prog, "-p", prompt, "--yolo", "--model", "gemini-2.5-flash", *extra]
        if relay_run:
            cmd = [str(self.bin / "relay"), "run", "--as", relay_run, "--kind", runtime, "--", *cmd]
        t0 = time.monotonic()
        try:
            r = subprocess.run(
                cmd,
                env=self.env(**(env or {})),
                cwd=self.work,
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            code, out, err = r.returncode, r.stdout, r.stderr
        except subprocess.TimeoutExpired as e:
            code, out, err = "timeout", str(e.stdout or ""), str(e.stderr or "")
        return {"code": code, "out": out, "err": err, "secs": time.monotonic() - t0}

    def hook_events(self) -> list[dict]:
        """Every hook event a runtime sent to relay: (args, meta, event)."""
        out = []
        for f in sorted(self.events.glob("ev.*")):
            if f.suffix in (".meta", ".out", ".err"):
                continue
            meta = f.parent / (f.name + ".meta")
            lines = meta.read_text().splitlines() if meta.exists() else ["", "", "0"]
            try:
                doc = json.loads(f.read_text() or "null")
            except ValueError:
                doc = {"_unparsed": f.read_text()[:500]}
            end = float(lines[3]) if len(lines) > 4 else None
            t = float(lines[2]) if len(lines) > 2 else 0.0
            out.append(
                {
                    "args": lines[0],
                    "env": lines[1] if len(lines) > 1 else "",
                    "t": t,
                    "end": end,
                    "secs": round(end - t, 3) if end else None,
                    "exit": lines[4] if len(lines) > 4 else None,
                    "event": doc,
                    "out": _read(f.parent / (f.name + ".out")),
                    "err": _read(f.parent / (f.name + ".err")),
                }
            )
        return sorted(out, key=lambda e: e["t"])

    def queued_notes(self) -> list[str]:
        """The note of every `codex queue --message NOTE` the Codex waiter ran, read back
        from the user turns Codex recorded (``$CODEX_HOME/thread_history_*.sqlite``, Codex
        0.171.0) that start as relay's note does: the waiter runs the native executable
        that runs the session, not a `codex` on PATH that could keep them (wake.py)."""
        notes: list[str] = []
        for f in sorted((self.home / ".codex").glob("thread_history_*.sqlite")):
            notes += [n for n in _codex_user_turns(f) if n.startswith(NOTE_START)]
        return list(dict.fromkeys(notes))

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
        # waiters and daemons started by the runtimes: everything in this sandbox's dirs
        kill_sandbox_processes(self.dir)
        for cleanup in reversed(self.cleanups):
            try:
                cleanup()
            except Exception:  # noqa: BLE001 - the rest is cleaned up all the same
                pass
        self.model.close()
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def kill_sandbox_processes(d: Path, timeout: float = 10.0) -> list[int]:
    """End every process this sandbox started: each whose environment names a path in the
    sandbox (HOME, TMPDIR, RELAY_HOME, … are all in it). One pass is not enough: a process
    killed late in a pass may have started another meanwhile (a runtime's hook starting a
    waiter), so passes repeat until one finds nothing alive (at most ``timeout`` s).
    Returns the pids killed."""
    mark = f"={d}".encode()
    me = os.getpid()
    killed: list[int] = []
    end = time.monotonic() + timeout
    while True:
        found = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == me:
                continue
            try:
                env = Path(f"/proc/{pid}/environ").read_bytes()
            except OSError:
                continue  # gone, or a zombie (its environment reads empty)
            if any(v == mark or v.startswith(mark + b"/") for v in _values(env)):
                found.append(int(pid))
        for pid in found:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        killed += found
        if not found or time.monotonic() > end:
            return killed
        time.sleep(0.05)


def _values(environ: bytes) -> list[bytes]:
    """``=VALUE`` of each ``NAME=VALUE`` of a /proc/PID/environ."""
    return [entry[entry.index(b"=") :] for entry in environ.split(b"\0") if b"=" in entry]
