"""What relay's texts cost as they reached the model (design.md §18; docs/e2e.md).

The scripted model server logs every request a runtime sent. relay's texts are known
exactly: what each `relay hook` printed (its context or Stop reason), a waiter's note
(stderr of an exit 2; for Codex the `--message` of `codex queue`). Each is found in the
model's requests and counted in o200k_base tokens (testsupport/tokens.py) *as it arrived*:
with the words the runtime put around it, its envelope -- in the same message part, on
each side up to a blank line (at most 600 characters a side) and closing tags after it
(Claude Code's "UserPromptSubmit hook additional context: ", Codex's `<hook_prompt …>`,
Gemini CLI's `<hook_context>`, Copilot CLI's `<system_reminder>`). A notice a runtime adds
for every hook of that kind in a paragraph of its own (Claude Code's "[SYSTEM NOTIFICATION
- NOT USER INPUT] …" before a background hook's output) is not counted.

Per case it reports: each distinct relay text the first time it reached the model (what
kind: the session-start context, a prompt's listing, a Stop block, a wake note; its
tokens with and without the envelope; how many copies of it one model request held), the
share of relay in the first model request, the output of the `relay claim` the model ran
(tokens besides the request's own text), and every model request in which one request id
arrived more than once -- in two of relay's texts (relay announced it twice) or in two
copies of one text (the runtime sent it twice).
"""

from __future__ import annotations

import json
import re
from collections import Counter

from testsupport import tokens

from . import fake_models

ENVELOPE_REACH = 600  # characters of a message part on each side of relay's text
CLOSING = re.compile(r"(?:\s|&lt;/[\w-]+&gt;|</[\w-]+>)*")
KINDS = {
    "SessionStart": "start",
    "UserPromptSubmit": "prompt",
    "BeforeAgent": "prompt",
    "Stop": "stop",
    "AfterAgent": "stop",
}


def relay_texts(sb) -> list[dict]:
    """Every text relay handed the runtime in this sandbox: {kind, text}."""
    out: list[dict] = []
    for e in sb.hook_events():
        doc, args = e["event"], e["args"]
        name = doc.get("hook_event_name") if isinstance(doc, dict) else None
        if "--wake" in args.split():
            if e.get("exit") == "2" and e.get("err", "").strip():
                out.append({"kind": "wake", "text": e["err"].strip()})
            continue
        try:
            answer = json.loads(e.get("out") or "null")
        except ValueError:
            continue
        if not isinstance(answer, dict):
            continue
        found = [answer.get("reason"), answer.get("additionalContext")]
        found.append((answer.get("hookSpecificOutput") or {}).get("additionalContext"))
        for text in found:
            if isinstance(text, str) and text.strip():
                out.append({"kind": KINDS.get(name, name or "?"), "text": text})
    out += [{"kind": "wake", "text": note} for note in sb.queued_notes() if note.strip()]
    seen, unique = set(), []
    for t in out:
        if t["text"] not in seen:
            seen.add(t["text"])
            unique.append(t)
    return unique


def _leaves(doc, path: str = ""):
    """(path, string) for every string in a request body."""
    if isinstance(doc, str):
        yield path, doc
    elif isinstance(doc, dict):
        for k, v in doc.items():
            yield from _leaves(v, f"{path}.{k}")
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _leaves(v, f"{path}[{i}]")


def _spans(leaf: str, texts: list[dict]) -> list[tuple[int, int, int]]:
    """(start, end, index into texts) of each of relay's texts found in ``leaf``."""
    found = []
    for n, t in sorted(enumerate(texts), key=lambda p: -len(p[1]["text"])):
        start = leaf.find(t["text"])
        while start != -1:
            end = start + len(t["text"])
            if not any(s < end and start < e for s, e, _ in found):
                found.append((start, end, n))
            start = leaf.find(t["text"], end)
    return sorted(found)


def _envelope(leaf: str, start: int, end: int) -> tuple[int, int]:
    """The part of ``leaf`` around relay's text [start, end) that the runtime added."""
    left = leaf.rfind("\n\n", 0, start)
    left = 0 if left == -1 else left + 2
    if start - left > ENVELOPE_REACH:
        left = start
    right = leaf.find("\n\n", end)
    right = len(leaf) if right == -1 else right
    if right - end > ENVELOPE_REACH:
        right = end
    tail = CLOSING.match(leaf, right)
    if tail is not None and tail.end() == len(leaf):
        right = len(leaf)
    return left, right


def _ids_in(text: str, ids: list[str]) -> Counter:
    """How often each request id is named in ``text`` (in full or by a prefix of 8+)."""
    named: Counter = Counter()
    for rid in ids:
        n = text.count(rid[:8])
        if n:
            named[rid] = n
    return named


def _parser(path: str):
    if path.startswith("/v1/messages"):
        return fake_models.anthropic_turns
    if "chat/completions" in path:
        return fake_models.chat_turns
    if "GenerateContent" in path:
        return fake_models.gemini_turns
    return fake_models.responses_turns


def claim_outputs(item: dict, texts_by_id: dict[str, str]) -> list[dict]:
    """What each `relay claim --id ID` the model ran printed, as the model got it back."""
    turns = _parser(item["path"])(item["body"])
    out = []
    for i, t in enumerate(turns):
        if t[0] != "call" or not t[1].startswith("relay claim"):
            continue
        result = next((r[1] for r in turns[i + 1 :] if r[0] == "result"), None)
        if result is None:
            continue
        rid = next((r for r in texts_by_id if r[:8] in t[1]), None)
        body = texts_by_id.get(rid, "") if rid else ""
        total = tokens.count(result)
        out.append(
            {
                "command": t[1],
                "tokens": total,
                "text_tokens": tokens.count(body) if body and body in result else 0,
                "besides_text": total - (tokens.count(body) if body and body in result else 0),
            }
        )
    return out


def analyse(sb, requests: dict[str, str] | None = None) -> dict:
    """The token facts of one case (see the module's docstring). ``requests``: every
    request id of the case with its text (for the claim's output), else read with
    `relay list`."""
    texts = relay_texts(sb)
    if requests is None:
        rows = sb.relay_json("list", "--all")["requests"]
        requests = {r["id"]: sb.relay_json("show", r["id"]).get("text") or "" for r in rows}
    ids = sorted(requests)
    first_seen: dict[int, dict] = {}
    per_request = []
    twice = []
    turns = sb.model.log.model_turns()
    for n, item in enumerate(turns):
        relay_tokens = 0
        all_tokens = 0
        named: Counter = Counter()
        copies: Counter = Counter()
        for path, leaf in _leaves(item["body"]):
            all_tokens += tokens.count(leaf)
            if path.startswith(".tools"):
                continue
            for start, end, k in _spans(leaf, texts):
                left, right = _envelope(leaf, start, end)
                seg = leaf[left:right]
                cost = tokens.count(seg)
                relay_tokens += cost
                copies[k] += 1
                named.update(_ids_in(texts[k]["text"], ids))
                if k not in first_seen:
                    first_seen[k] = {
                        "kind": texts[k]["kind"],
                        "first_in_request": n,
                        "tokens": tokens.count(texts[k]["text"]),
                        "as_arrived": cost,
                        "envelope": cost - tokens.count(texts[k]["text"]),
                        "ids": len(_ids_in(texts[k]["text"], ids)),
                    }
        for k, c in copies.items():
            if k in first_seen:
                first_seen[k]["copies"] = max(first_seen[k].get("copies", 1), c)
        for rid, c in named.items():
            if c > 1:
                in_texts = [k for k in copies if rid[:8] in texts[k]["text"]]
                by = "relay" if len(in_texts) > 1 else "runtime"
                twice.append({"request": n, "id": rid[:8], "times": c, "by": by})
        per_request.append({"relay": relay_tokens, "all": all_tokens})
    claims = []
    if turns:
        claims = claim_outputs(turns[-1], requests)
    first = per_request[0] if per_request else {"relay": 0, "all": 0}
    return {
        "texts": [
            first_seen[k]
            for k in sorted(first_seen, key=lambda k: first_seen[k]["first_in_request"])
        ],
        "first_request": {
            **first,
            "share": round(first["relay"] / first["all"], 4) if first["all"] else None,
        },
        "last_request_relay": per_request[-1]["relay"] if per_request else 0,
        "claims": claims,
        "ids_twice": twice,
        "model_requests": len(turns),
    }
