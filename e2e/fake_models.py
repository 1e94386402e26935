"""Scripted model servers for relay's end-to-end harness (docs/e2e.md, design.md §12).

Four wire formats on 127.0.0.1, one script ("brain") behind them:

- Anthropic Messages: ``POST /v1/messages`` (streaming SSE; plain JSON when not streaming),
  ``POST /v1/messages/count_tokens``.
- OpenAI Responses: ``POST /v1/responses`` (SSE; a ``function_call`` for the shell tool).
- Gemini: ``POST /v1beta/models/MODEL:streamGenerateContent?alt=sse`` (SSE),
  ``…:generateContent`` and ``…:countTokens``.
- OpenAI Chat Completions: ``POST /v1/chat/completions`` (SSE chunks ending ``[DONE]``, or
  plain JSON when not streaming; ``tool_calls`` for a ``bash`` function tool), the wire of
  opencode's ``@ai-sdk/openai-compatible`` provider.

The brain reads the conversation, normalised to a list of turns, and decides one step:

1. the last turn is the output of ``relay claim --id X`` that claimed X, and the prompt did
   not say ``E2E-NOREPLY`` -> a shell call ``relay reply X …``;
2. the last user turn (a prompt, a hook's context, a Stop block's reason, a waiter's
   note) names ``relay claim --id X`` for an X not yet claimed -> a shell call claiming it;
3. the prompt says ``E2E-RUN: CMD`` and CMD has not run yet -> a shell call running CMD;
4. otherwise a final text.

``FakeModel.fail_reply`` makes the request whose answer would be step 1 (the reply after
a claim) fail instead, with HTTP 400 in the API's error shape: the turn fails on an error
the runtime reports while the agent holds the claimed request. ``E2E-ASK`` in the prompt
makes a Codex shell call ask to run outside its sandbox (``sandbox_permissions:
require_escalated``), which its approval policy ``on-request`` puts to a person.

Every request body is logged (``Log``), with the time it arrived, so a test asserts what
reached the model and a benchmark measures when.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# relay's notes name requests as `relay claim --id ID`; ids are UUIDs or 8+ hex prefixes.
# Codex and Gemini may hand text HTML-escaped; the id itself has no such characters.
CLAIM = re.compile(r"relay claim --id ([0-9a-f]{8}[0-9a-f-]*)")
UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
RUN = re.compile(r"E2E-RUN: ([^\n]+)")
FINAL = "E2E-DONE"


class Log:
    """Every request a fake model received: (monotonic time, path, body)."""

    def __init__(self, path=None):
        self.items: list[dict] = []
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.path = path

    def add(self, kind: str, path: str, body, step=None) -> None:
        item = {
            "t": time.monotonic(),
            "wall": time.time(),
            "kind": kind,
            "path": path,
            "body": body,
            "step": step,
        }
        with self.cond:
            self.items.append(item)
            self.cond.notify_all()
        if self.path:
            with open(self.path, "a") as f:
                f.write(json.dumps(item) + "\n")

    def wait_for(self, pred, timeout: float, start: int = 0):
        """Block until a logged item (from index ``start``) satisfies ``pred``."""
        end = time.monotonic() + timeout
        with self.cond:
            while True:
                for item in self.items[start:]:
                    if pred(item):
                        return item
                left = end - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)

    def claims(self) -> list[tuple[int, str]]:
        """(turn number, id) for each model request the script answered with a claim."""
        out = []
        for n, i in enumerate(self.model_turns()):
            m = CLAIM.search((i.get("step") or ("", ""))[1]) if i.get("step") else None
            if m and i["step"][0] == "shell":
                out.append((n, m.group(1)))
        return out

    def model_turns(self) -> list[dict]:
        """The requests that asked the model for a conversation step (tools offered)."""
        return [i for i in self.items if i["kind"] == "turn"]

    def texts(self) -> str:
        return "\n".join(json.dumps(i["body"]) for i in self.items)


def decide(turns: list[tuple]) -> tuple[str, str]:
    """One step of the script. ``turns``: ("user", text) | ("call", cmd) | ("result", text).

    Returns ("shell", command) or ("text", text).
    """
    calls = [t[1] for t in turns if t[0] == "call"]
    claimed = {m.group(1) for c in calls for m in CLAIM.finditer(c)}
    users = [t[1] for t in turns if t[0] == "user"]
    noreply = any("E2E-NOREPLY" in u for u in users)
    # the tail: everything after the model's last call or text
    tail: list[tuple] = []
    for t in reversed(turns):
        if t[0] in ("call", "model"):
            break
        tail.insert(0, t)
    last_call = next((t[1] for t in reversed(turns) if t[0] == "call"), None)
    results = [t[1] for t in tail if t[0] == "result"]
    if results and last_call and not noreply:
        m = CLAIM.search(last_call)
        if m and m.group(1)[:8] in results[-1] and "error" not in results[-1][:200].lower():
            rid = m.group(1)
            if not any(c.startswith(f"relay reply {rid}") for c in calls):
                return "shell", f"relay reply {rid} 'done by the e2e model'"
    tail_text = "\n".join(t[1] for t in tail)
    named = [m.group(1) for m in CLAIM.finditer(tail_text)]
    if "relay claim" in tail_text:  # relay's notes list the ids, then how to claim one
        named += UUID.findall(tail_text)
    for rid in named:
        if rid not in claimed and not any(rid in c for c in calls):
            return "shell", f"relay claim --id {rid}"
    for u in users:
        for m in RUN.finditer(u):
            cmd = m.group(1).strip()
            if cmd not in calls:
                return "shell", cmd
    return "text", FINAL


def _text_of(content) -> str:
    if isinstance(content, str):
        return content
    out = []
    for block in content or []:
        if isinstance(block, dict):
            if block.get("type") in ("text", "input_text", "output_text"):
                out.append(block.get("text", ""))
            elif block.get("type") == "tool_result":
                out.append(_text_of(block.get("content")))
        elif isinstance(block, str):
            out.append(block)
    return "\n".join(out)


# ---------------------------------------------------------------- Anthropic Messages


def anthropic_turns(body: dict) -> list[tuple]:
    turns = []
    for msg in body.get("messages", []):
        content = msg.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for block in content:
            kind = block.get("type")
            if msg["role"] == "assistant":
                if kind == "tool_use":
                    turns.append(("call", (block.get("input") or {}).get("command", "")))
                elif kind == "text":
                    turns.append(("model", block.get("text", "")))
            elif kind == "tool_result":
                turns.append(("result", _text_of(block.get("content"))))
            elif kind == "text":
                turns.append(("user", block.get("text", "")))
    return turns


def _sse(event: str | None, data: dict) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def anthropic_step(body: dict) -> tuple[str, str]:
    tools = [t.get("name") for t in body.get("tools") or []]
    return decide(anthropic_turns(body)) if "Bash" in tools else ("text", FINAL)


def anthropic_answer(body: dict, n: int, step) -> tuple[str, list[bytes] | dict]:
    model = body.get("model", "claude")
    if step[0] == "shell":
        block = {
            "type": "tool_use",
            "id": f"toolu_e2e_{n}",
            "name": "Bash",
            "input": {"command": step[1], "description": "relay"},
        }
        stop = "tool_use"
    else:
        block = {"type": "text", "text": step[1]}
        stop = "end_turn"
    usage = {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    if not body.get("stream"):
        return "json", {
            "id": f"msg_e2e_{n}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [block],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
    start = dict(block, input={}) if block["type"] == "tool_use" else dict(block, text="")
    delta = (
        {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        if block["type"] == "tool_use"
        else {"type": "text_delta", "text": block["text"]}
    )
    events = [
        _sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_e2e_{n}",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage,
                },
            },
        ),
        _sse(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": start},
        ),
        _sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        ),
        _sse("message_stop", {"type": "message_stop"}),
    ]
    return "sse", events


# ---------------------------------------------------------------- OpenAI Responses


def responses_turns(body: dict) -> list[tuple]:
    turns = []
    items = body.get("input") or []
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            text = _text_of(item.get("content"))
            turns.append(("model" if role == "assistant" else "user", text))
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            turns.append(("call", _command_of(item)))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            out = item.get("output")
            if isinstance(out, dict):
                out = out.get("content") or json.dumps(out)
            elif isinstance(out, list):
                out = _text_of(out)
            turns.append(("result", str(out)))
    return turns


def _command_of(item: dict) -> str:
    raw = item.get("arguments") or item.get("input") or "{}"
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return str(raw)
    cmd = args.get("cmd") or args.get("command") or ""
    if isinstance(cmd, list):
        cmd = cmd[-1] if cmd else ""
    return cmd


def _shell_call(body: dict, cmd: str, n: int) -> dict:
    """A function_call for whichever shell tool the request offers."""
    names = {(t.get("name") or t.get("type")): t for t in body.get("tools") or []}
    if "exec_command" in names:
        name, args = "exec_command", {"cmd": cmd, "yield_time_ms": 10000}
        params = (names["exec_command"].get("parameters") or {}).get("properties") or {}
        asks = any(t[0] == "user" and "E2E-ASK" in t[1] for t in responses_turns(body))
        if asks and "sandbox_permissions" in params:
            args["sandbox_permissions"] = "require_escalated"
            args["justification"] = "e2e: may this command run outside the sandbox?"
    elif "shell_command" in names:
        name, args = "shell_command", {"command": cmd}
    elif "bash" in names:  # GitHub Copilot CLI (COPILOT_PROVIDER_WIRE_API=responses)
        name, args = "bash", {"command": cmd, "description": "relay"}
    else:
        name, args = "shell", {"command": ["bash", "-lc", cmd]}
    return {
        "type": "function_call",
        "id": f"fc_e2e_{n}",
        "call_id": f"call_e2e_{n}",
        "name": name,
        "arguments": json.dumps(args),
        "status": "completed",
    }


def responses_step(body: dict) -> tuple[str, str]:
    return decide(responses_turns(body)) if body.get("tools") else ("text", FINAL)


def responses_answer(body: dict, n: int, step) -> tuple[str, list[bytes]]:
    if step[0] == "shell":
        item = _shell_call(body, step[1], n)
    else:
        item = {
            "type": "message",
            "id": f"msg_e2e_{n}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": step[1], "annotations": []}],
        }
    rid = f"resp_e2e_{n}"
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }
    resp = {"id": rid, "object": "response", "status": "in_progress", "output": []}
    events = [
        _sse("response.created", {"type": "response.created", "response": resp}),
        _sse(
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": 0, "item": item},
        ),
        _sse(
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        ),
        _sse(
            "response.completed",
            {
                "type": "response.completed",
                "response": dict(resp, status="completed", output=[item], usage=usage),
            },
        ),
    ]
    return "sse", events


# ---------------------------------------------------------------- Gemini


def gemini_turns(body: dict) -> list[tuple]:
    turns = []
    for content in body.get("contents", []):
        role = content.get("role")
        for part in content.get("parts", []):
            if "functionCall" in part:
                turns.append(("call", (part["functionCall"].get("args") or {}).get("command", "")))
            elif "functionResponse" in part:
                resp = part["functionResponse"].get("response") or {}
                turns.append(
                    (
                        "result",
                        resp.get("output")
                        if isinstance(resp.get("output"), str)
                        else json.dumps(resp),
                    )
                )
            elif "text" in part:
                turns.append(("model" if role == "model" else "user", part["text"]))
    return turns


def gemini_step(body: dict) -> tuple[str, str]:
    decls = [
        d.get("name") for t in body.get("tools") or [] for d in t.get("functionDeclarations") or []
    ]
    if "run_shell_command" in decls:
        return decide(gemini_turns(body))
    if (body.get("generationConfig") or {}).get("responseMimeType") == "application/json":
        # the CLI's own side questions (routing, next speaker): a neutral JSON answer
        return (
            "text",
            json.dumps({"reasoning": "e2e", "next_speaker": "user", "model_choice": "flash"}),
        )
    return ("text", FINAL)


def gemini_answer(body: dict, n: int, stream: bool, step) -> tuple[str, list[bytes] | dict]:
    if step[0] == "shell":
        part = {
            "functionCall": {
                "name": "run_shell_command",
                "args": {"command": step[1], "description": "relay"},
            }
        }
    else:
        part = {"text": step[1]}
    doc = {
        "candidates": [
            {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": "gemini-e2e",
    }
    if not stream:
        return "json", doc
    return "sse", [_sse(None, doc)]


# ---------------------------------------------------------------- OpenAI Chat Completions


def chat_turns(body: dict) -> list[tuple]:
    turns = []
    for msg in body.get("messages") or []:
        role = msg.get("role")
        if role == "system":
            continue
        if role == "assistant":
            if msg.get("content"):
                turns.append(("model", _text_of(msg.get("content"))))
            for call in msg.get("tool_calls") or []:
                turns.append(("call", _command_of(call.get("function") or {})))
        elif role == "tool":
            turns.append(("result", _text_of(msg.get("content"))))
        else:
            turns.append(("user", _text_of(msg.get("content"))))
    return turns


def _chat_tools(body: dict) -> dict:
    return {
        (t.get("function") or {}).get("name"): t.get("function") or {}
        for t in body.get("tools") or []
    }


def chat_step(body: dict) -> tuple[str, str]:
    return decide(chat_turns(body)) if "bash" in _chat_tools(body) else ("text", FINAL)


def _chat_args(fn: dict, cmd: str) -> dict:
    """The bash tool's arguments: the command, and a value for every other required one."""
    params = fn.get("parameters") or {}
    args = {}
    for name in params.get("required") or ["command"]:
        kind = ((params.get("properties") or {}).get(name) or {}).get("type")
        if name == "command":
            args[name] = cmd
        elif kind in ("number", "integer"):
            args[name] = 60000
        elif kind == "boolean":
            args[name] = False
        else:
            args[name] = "relay"
    args.setdefault("command", cmd)
    return args


def chat_answer(body: dict, n: int, step) -> tuple[str, list[bytes] | dict]:
    model = body.get("model", "fake-model")
    head = {"id": f"chatcmpl-e2e-{n}", "created": int(time.time()), "model": model}
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    if step[0] == "shell":
        fn = _chat_tools(body).get("bash") or {}
        call = {
            "id": f"call_e2e_{n}",
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps(_chat_args(fn, step[1]))},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        delta = {"role": "assistant", "tool_calls": [dict(call, index=0)]}
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": step[1]}
        delta = {"role": "assistant", "content": step[1]}
        finish = "stop"
    if not body.get("stream"):
        return "json", dict(
            head,
            object="chat.completion",
            choices=[{"index": 0, "message": message, "finish_reason": finish}],
            usage=usage,
        )
    chunk = dict(head, object="chat.completion.chunk")
    events = [
        _sse(None, dict(chunk, choices=[{"index": 0, "delta": delta, "finish_reason": None}])),
        _sse(None, dict(chunk, choices=[{"index": 0, "delta": {}, "finish_reason": finish}])),
        _sse(None, dict(chunk, choices=[], usage=usage)),
        b"data: [DONE]\n\n",
    ]
    return "sse", events


# ---------------------------------------------------------------- the server


def _error_doc(path: str, message: str) -> dict:
    """A 400 in the shape of the API ``path`` belongs to."""
    if path.startswith("/v1/messages"):
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    if ":streamGenerateContent" in path or ":generateContent" in path:
        return {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "FakeModel"

    def log_message(self, *a):  # quiet
        pass

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return {"_raw": raw.decode("utf-8", "replace")}

    def do_GET(self):
        self.server.log.add("other", self.path, None)
        self._send_json(200, {"data": [], "models": []})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        body = self._body()
        path = self.path
        srv = self.server
        with srv.counter_lock:
            srv.counter += 1
            n = srv.counter
        if path.startswith("/v1/messages/count_tokens"):
            srv.log.add("other", path, body)
            return self._send_json(200, {"input_tokens": 10})
        if path.startswith("/v1/messages"):
            offered = [t.get("name") for t in body.get("tools") or []]
            step = anthropic_step(body)
            srv.log.add("turn" if "Bash" in offered else "other", path, body, step)
            kind, payload = anthropic_answer(body, n, step)
        elif path.startswith("/v1/responses") or path.endswith("/responses"):
            step = responses_step(body)
            srv.log.add("turn" if body.get("tools") else "other", path, body, step)
            kind, payload = responses_answer(body, n, step)
        elif path.startswith("/v1/chat/completions") or path.endswith("/chat/completions"):
            step = chat_step(body)
            srv.log.add("turn" if "bash" in _chat_tools(body) else "other", path, body, step)
            kind, payload = chat_answer(body, n, step)
        elif ":streamGenerateContent" in path or ":generateContent" in path:
            decls = [
                d.get("name")
                for t in body.get("tools") or []
                for d in t.get("functionDeclarations") or []
            ]
            step = gemini_step(body)
            srv.log.add("turn" if "run_shell_command" in decls else "other", path, body, step)
            kind, payload = gemini_answer(body, n, ":streamGenerateContent" in path, step)
        elif ":countTokens" in path:
            srv.log.add("other", path, body)
            return self._send_json(200, {"totalTokens": 10})
        else:
            srv.log.add("other", path, body)
            return self._send_json(
                404, {"error": {"message": "not scripted", "type": "not_found_error"}}
            )
        if srv.fail_reply and step[0] == "shell" and step[1].startswith("relay reply "):
            return self._send_json(400, _error_doc(path, "e2e: a scripted failure"))
        if kind == "json":
            return self._send_json(200, payload)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for chunk in payload:
            self.wfile.write(chunk)
            self.wfile.flush()
        self.close_connection = True

    def _send_json(self, code: int, doc) -> None:
        raw = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


class FakeModel(ThreadingHTTPServer):
    """One scripted model server on 127.0.0.1 (any free port); serves all four formats."""

    daemon_threads = True

    def __init__(self, log_path=None):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.log = Log(log_path)
        self.counter = 0
        self.counter_lock = threading.Lock()
        self.fail_reply = False  # the reply after a claim fails (HTTP 400)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def close(self) -> None:
        self.shutdown()
        self.server_close()
