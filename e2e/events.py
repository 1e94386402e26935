"""Hook events the real runtimes sent, checked against relay's fixture schemas (design.md
§12; tests/fixtures/README.md): every event must validate, so the fixtures stay true."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
SCHEMAS = {
    "claude": {
        "SessionStart": "SessionStartHookInput",
        "UserPromptSubmit": "UserPromptSubmitHookInput",
        "Stop": "StopHookInput",
        "SessionEnd": "SessionEndHookInput",
        # observed only (design.md §19)
        "PermissionRequest": "PermissionRequestHookInput",
        "Notification": "NotificationHookInput",
        "PostToolUse": "PostToolUseHookInput",
        "StopFailure": "StopFailureHookInput",
    },
    "codex": {
        "SessionStart": "session-start.command.input",
        "UserPromptSubmit": "user-prompt-submit.command.input",
        "Stop": "stop.command.input",
        "SessionEnd": "session-end.command.input",
        "PermissionRequest": "permission-request.command.input",
        "PostToolUse": "post-tool-use.command.input",
    },
    "gemini": {
        "SessionStart": "SessionStart.input",
        "BeforeAgent": "BeforeAgent.input",
        "AfterAgent": "AfterAgent.input",
        "SessionEnd": "SessionEnd.input",
        "Notification": "Notification.input",
    },
    # what relay's plugin sends (relay_cli/agents/opencode_plugin.py)
    "opencode": {
        "SessionStart": "SessionStart.input",
        "UserPromptSubmit": "UserPromptSubmit.input",
        "Stop": "Stop.input",
        "Notification": "Notification.input",
        "PostToolUse": "PostToolUse.input",
        "StopFailure": "StopFailure.input",
    },
    "copilot": {
        "SessionStart": "SessionStart.input",
        "UserPromptSubmit": "UserPromptSubmit.input",
        "Stop": "Stop.input",
        "SessionEnd": "SessionEnd.input",
        "Notification": "Notification.input",
        "ErrorOccurred": "ErrorOccurred.input",
    },
}


def _validator():
    spec = importlib.util.spec_from_file_location(
        "schema_subset", ROOT / "testsupport" / "schema_subset.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.errors


def schema(runtime: str, event: str) -> dict | None:
    name = SCHEMAS.get(runtime, {}).get(event)
    if not name:
        return None
    return json.loads((FIXTURES / runtime / "schemas" / f"{name}.json").read_text())


def properties(doc: dict, root: dict | None = None) -> set[str]:
    root = root or doc
    out = set(doc.get("properties", {}))
    for key in ("allOf", "anyOf", "oneOf"):
        for sub in doc.get(key, []):
            out |= properties(sub, root)
    if "$ref" in doc:
        out |= properties(root["definitions"][doc["$ref"].split("/")[-1]], root)
    return out


def check(events: list[dict]) -> dict:
    """Per runtime: events seen by name, schema errors, fields beyond / never seen."""
    errors = _validator()
    out: dict[str, dict] = {}
    for e in events:
        args = e["args"].split()
        if len(args) < 2 or args[0] != "hook":
            continue
        runtime = args[1]
        r = out.setdefault(
            runtime,
            {"count": 0, "by_event": {}, "errors": [], "fields_added": {}, "fields_seen": {}},
        )
        doc = e["event"]
        name = doc.get("hook_event_name") if isinstance(doc, dict) else None
        r["count"] += 1
        r["by_event"][name] = r["by_event"].get(name, 0) + 1
        sch = schema(runtime, name) if name else None
        if sch is None:
            r["errors"].append(f"{name!r}: no fixture schema for this event ({args})")
            continue
        errs = errors(doc, sch)
        if errs:
            r["errors"].append(f"{name}: {errs[:3]}")
        known = properties(sch)
        extra = sorted(set(doc) - known)
        if extra:
            r["fields_added"].setdefault(
                name, sorted(set(r["fields_added"].get(name, [])) | set(extra))
            )
        r["fields_seen"][name] = sorted(set(r["fields_seen"].get(name, [])) | set(doc))
    for runtime, r in out.items():
        r["fields_never_sent"] = {
            name: sorted(properties(schema(runtime, name)) - set(seen))
            for name, seen in r.pop("fields_seen").items()
            if schema(runtime, name)
        }
    return out
