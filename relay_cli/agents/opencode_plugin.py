"""relay's plugin for opencode: the file `relay hook install opencode` writes (design.md §12).

opencode has no command hooks: it loads JavaScript plugins from
``~/.config/opencode/plugins/`` (``$XDG_CONFIG_HOME/opencode/plugins/``) and a project's
``.opencode/plugins/``. relay's plugin is one file of relay's own, in the module shape
opencode 1.18.33 defines (``@opencode-ai/plugin``'s ``PluginModule``: a default export
``{id, server}`` whose ``server(input)`` returns the hooks). It runs
``relay hook opencode`` with a Claude-shaped event on stdin and reads relay's answer:

- ``chat.message`` (every user message: typed, ``prompt_async``, ``noReply``): the first
  one of a session id is SessionStart, each one UserPromptSubmit; relay's context becomes
  a synthetic text part of that message, which reaches the model verbatim;
- ``experimental.text.complete`` (an answer's text is complete, inside the loop before it
  ends): Stop; a block becomes a ``noReply`` message, which makes the loop go on;
- the ``session.idle`` bus event: relay's wake waiter ``relay hook opencode --wake``; its
  exit 2 note goes into the session with ``client.session.promptAsync`` (in-process: no
  port is opened for it); that note's own ``chat.message`` runs no relay process;
- the bus events that show what the session does (design.md §19), only recorded:
  ``permission.asked`` and ``question.asked`` (a Notification, not in ``opencode run``,
  which answers by itself), their ``…replied``/``rejected`` (PostToolUse: the wait is
  over), ``session.error`` but an abort (StopFailure).

opencode has no session-end event (checked with 1.18.33): `relay run` leaves for it. The
plugin does nothing unless RELAY_PEER or RELAY_SESSION is set. The marker line lets
install and uninstall tell relay's file from anyone else's.
"""

from __future__ import annotations

import json

MARKER = "// relay-opencode-plugin: 1"
CHECKED = "1.18.33"
KNOWN_MAJOR = 1  # the plugin shape relay's plugin is written for: opencode 1.x

_TEMPLATE = """\
{marker}
// relay's plugin for opencode {major}.x (checked with {checked}). Written by
// `relay hook install opencode`; `relay hook uninstall opencode` removes it.
// Edits are overwritten by the next install.
import {{ spawn }} from "node:child_process"

const RELAY = {relay}
const HOOK_TIMEOUT_MS = {hook_ms}
const state = (globalThis.__relayOpencode ??= {{
  started: new Set(), active: new Map(), waiters: new Map(), notes: new Set(),
}})

const identity = () => Boolean(process.env.RELAY_PEER || process.env.RELAY_SESSION)
// `opencode run` exits when its session goes idle: no waiter there (nothing to wake).
const HEADLESS = process.argv.slice(2).find((a) => !a.startsWith("-")) === "run"

// One `relay hook opencode [--wake]` run: {{code, out, err}}; never throws.
function relay(args, doc, timeoutMs) {{
  return new Promise((resolve) => {{
    let out = "", err = "", done = false
    const finish = (code) => {{ if (!done) {{ done = true; resolve({{ code, out, err }}) }} }}
    let child
    try {{
      child = spawn(RELAY, ["hook", "opencode", ...args], {{ stdio: ["pipe", "pipe", "pipe"] }})
    }} catch (e) {{
      return finish(-1)
    }}
    const timer = timeoutMs ? setTimeout(() => child.kill("SIGTERM"), timeoutMs) : null
    child.stdout.on("data", (d) => (out += d))
    child.stderr.on("data", (d) => (err += d))
    child.on("error", () => finish(-1))
    child.on("close", (code) => {{ if (timer) clearTimeout(timer); finish(code) }})
    child.stdin.on("error", () => {{}})
    child.stdin.end(JSON.stringify(doc))
  }})
}}

async function hook(doc) {{
  const r = await relay([], doc, HOOK_TIMEOUT_MS)
  if (r.code !== 0 || !r.out.trim()) return null
  try {{ return JSON.parse(r.out) }} catch {{ return null }}
}}

const context = (answer) => {{
  const text = answer?.hookSpecificOutput?.additionalContext
  return typeof text === "string" && text ? text : null
}}

const Relay = async (input) => {{
  const client = input?.client
  if (typeof client?.session?.promptAsync !== "function" ||
      typeof client?.session?.prompt !== "function") {{
    throw new Error("relay: this opencode's plugin API is not the one relay's plugin was " +
      "written for (opencode {major}.x, checked with {checked}); run `relay hook uninstall " +
      "opencode` and see `relay doctor`")
  }}
  const cwd = input.directory

  const wake = (sid) => {{
    if (!identity() || HEADLESS || state.waiters.has(sid)) return
    state.waiters.set(sid, true)
    const doc = {{ hook_event_name: "Stop", session_id: sid, stop_hook_active: false, cwd,
                  opencode_event: "session.idle" }}
    relay(["--wake"], doc, 0).then(async (r) => {{
      state.waiters.delete(sid)
      const note = r.err.trim()
      if (r.code === 2 && note) {{
        state.notes.add(note)
        try {{
          await client.session.promptAsync({{ path: {{ id: sid }}, body: {{ parts: [{{ type: "text", text: note }}] }} }})
        }} catch {{}}
      }}
    }})
  }}

  return {{
    "chat.message": async (inp, output) => {{
      if (!identity()) return
      const sid = inp?.sessionID
      if (typeof sid !== "string" || !Array.isArray(output?.parts)) return
      const texts = []
      if (!state.started.has(sid)) {{
        state.started.add(sid)
        const t = context(await hook({{ hook_event_name: "SessionStart", session_id: sid,
          source: "startup", cwd, opencode_event: "chat.message" }}))
        if (t) texts.push(t)
      }}
      const prompt = output.parts
        .filter((p) => p?.type === "text" && !p.synthetic && typeof p.text === "string")
        .map((p) => p.text).join("\\n")
      const doc = {{ hook_event_name: "UserPromptSubmit", session_id: sid, prompt, cwd,
        opencode_event: "chat.message" }}
      // relay's own wake note names the requests itself (the waiter marked them named):
      // its turn starts at once, with no relay process beside it
      if (!state.notes.delete(prompt)) {{
        const t = context(await hook(doc))
        if (t) texts.push(t)
      }}
      const first = output.parts[0]
      texts.forEach((text, i) => {{
        const id = typeof first?.id === "string" ? first.id.slice(0, -4) + "zzz" + i : undefined
        output.parts.push({{ ...first, id, type: "text", synthetic: true, text }})
      }})
    }},
    "experimental.text.complete": async (inp) => {{
      if (!identity()) return
      const sid = inp?.sessionID
      if (typeof sid !== "string") return
      const answer = await hook({{ hook_event_name: "Stop", session_id: sid,
        stop_hook_active: Boolean(state.active.get(sid)), cwd,
        opencode_event: "experimental.text.complete" }})
      if (answer?.decision === "block" && typeof answer.reason === "string" && answer.reason) {{
        state.active.set(sid, true)
        await client.session.prompt({{ path: {{ id: sid }},
          body: {{ noReply: true, parts: [{{ type: "text", text: answer.reason }}] }} }})
      }} else {{
        state.active.set(sid, false)
      }}
    }},
    event: async ({{ event }}) => {{
      if (event?.type === "session.idle" && typeof event.properties?.sessionID === "string") {{
        wake(event.properties.sessionID)
      }}
      const doc = identity() ? observed(event, cwd) : null
      if (doc) relay([], doc, HOOK_TIMEOUT_MS)  // only recorded: nothing waits for it
    }},
  }}
}}

// What a bus event shows of the session (design.md §19), as the Claude-shaped event relay
// records; null for anything else. `opencode run` answers permissions by itself (it
// rejects them, or allows them with --auto): nobody is asked there.
const str = (v) => (typeof v === "string" ? v : undefined)
function observed(event, cwd) {{
  const p = event?.properties ?? {{}}
  const sid = str(p.sessionID)
  if (!sid) return null
  const base = {{ session_id: sid, cwd, opencode_event: event.type }}
  switch (event.type) {{
    case "permission.asked":
      if (HEADLESS) return null
      return {{ ...base, hook_event_name: "Notification", notification_type: "permission_prompt",
        message: [str(p.permission), ...(Array.isArray(p.patterns) ? p.patterns.filter(str) : [])]
          .filter(Boolean).join(" ") }}
    case "question.asked": {{
      if (HEADLESS) return null
      const q = Array.isArray(p.questions) ? p.questions[0] : undefined
      return {{ ...base, hook_event_name: "Notification", notification_type: "elicitation_dialog",
        message: str(q?.question) ?? str(q?.header) ?? "" }}
    }}
    case "permission.replied":
    case "question.replied":
    case "question.rejected":
      return HEADLESS ? null : {{ ...base, hook_event_name: "PostToolUse" }}
    case "session.error": {{
      const name = str(p.error?.name)
      if (!name || name === "MessageAbortedError") return null  // stopped, not failed
      return {{ ...base, hook_event_name: "StopFailure", error: name,
        error_details: str(p.error?.data?.message) ?? "" }}
    }}
  }}
  return null
}}

export default {{ id: "relay", server: Relay }}
"""


def text(relay_command: str, hook_timeout_s: int) -> str:
    """The plugin file, naming relay as ``relay_command`` (a path or ``relay``)."""
    return _TEMPLATE.format(
        marker=MARKER,
        major=KNOWN_MAJOR,
        checked=CHECKED,
        relay=json.dumps(relay_command),
        hook_ms=hook_timeout_s * 1000,
    )


def is_relays(data: bytes) -> bool:
    """Whether a plugin file is relay's (its first line is relay's marker)."""
    return data.split(b"\n", 1)[0].strip() == MARKER.encode()
