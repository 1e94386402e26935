"""`relay guide [--for claude|codex|generic]`: the instructions an agent needs."""

from __future__ import annotations

import json
import re

import pytest

from relay_cli import hook

# What every audience must be told (design.md §1, §5, §6, §10, §12).
MUST_SAY = [
    "--id",                       # always pass your own id
    "SAME id",                    # retry with the same id and content
    "the SAME text",
    '"not yet", never "failed"',  # a timeout is not a failure
    '`delivered` is not "read"',
    "delivery_unknown",
    "Ask the person",
    "never the user's approval",  # peer text is never user approval
    "Never forward a reply",
    "<<'EOF'",                    # heredoc on stdin
    'relay once --key "$TOOL_USE_ID" -- gh pr create',
    "effect_unknown",
    "person at a terminal",
]


@pytest.mark.parametrize("audience", ["generic", "claude", "codex"])
def test_every_audience_gets_the_rules(relay, audience):
    r = relay("guide", "--for", audience)
    assert r.code == 0 and r.err == ""
    for phrase in MUST_SAY:
        assert phrase in r.out, f"{audience} guide lacks {phrase!r}"
    assert "\x1b" not in r.out


def test_default_is_generic(relay):
    assert relay("guide").out == relay("guide", "--for", "generic").out


def test_claude_guide_has_the_settings_snippet_that_installs_the_hook(relay):
    text = relay("guide", "--for", "claude").out
    start = text.index('{\n  "hooks"')
    settings, _ = json.JSONDecoder().raw_decode(text[start:])
    assert set(settings["hooks"]) == {"SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"}
    assert set(settings["hooks"]) == set(hook.EVENTS)
    for groups in settings["hooks"].values():
        (group,) = groups
        (handler,) = group["hooks"]
        assert handler["type"] == "command" and handler["command"] == "relay hook claude"
    assert ".claude/settings.json" in text and "RELAY_PEER" in text


def test_codex_guide_says_how_to_wait_because_codex_cannot_be_woken(relay):
    text = relay("guide", "--for", "codex").out
    assert "relay claim --wait" in text and "relay wait ID --timeout" in text
    assert "not_configured" in text and "no way" in text
    assert "relay hook claude" not in text


def test_generic_guide_has_no_runtime_sections(relay):
    text = relay("guide").out
    assert "relay hook claude" not in text and "claim --wait 10m" in text
    assert "Codex" not in text


def test_json_output_is_one_document(relay):
    r = relay("guide", "--for", "codex", "--json")
    assert r.code == 0
    assert r.json == {"for": "codex", "text": relay("guide", "--for", "codex").out}


def test_unknown_audience_is_a_usage_error(relay):
    r = relay("guide", "--for", "gemini", "--json")
    assert (r.code, r.error["code"]) == (2, "usage_error") and r.out == ""


def test_guide_needs_no_state_directory(relay):
    assert relay("guide").code == 0
    assert not relay.home.exists()


def test_guide_text_stays_short_enough_to_paste(relay):
    for audience in ("generic", "claude", "codex"):
        text = relay("guide", "--for", audience).out
        assert len(text) < 12000
        assert max(len(line) for line in text.splitlines()) <= 100
        assert not re.search(r"[ \t]+$", text, re.M)


def test_the_send_example_runs_as_written(relay):
    """The guide's first shell block, with PEER filled in, sends exactly one request."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    block = re.search(r"```sh\n(.*?)```", relay("guide").out, re.S).group(1)
    alice = relay.join("alice")
    relay("peers", "add", "bob")
    env = {**relay._env(alice),
           "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]}
    script = block.replace("PEER", "bob")
    for _ in range(2):  # the retry, as written, is the same request
        p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env)
        assert p.returncode == 0, p.stderr
    requests = relay("list", "--json").json["requests"]
    assert len(requests) == 1 and requests[0]["to"] == "bob"
    assert relay("show", requests[0]["id"], "--json").json["text"] == (
        "What you want done, with everything the other agent needs to know.\n")


def test_readme_shows_the_same_settings_snippet():
    from pathlib import Path

    from relay_cli import guide

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    assert guide.claude_settings_json() in readme
