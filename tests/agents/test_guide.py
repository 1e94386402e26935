"""`relay guide [--for claude|codex|gemini|opencode|copilot|generic] [--full]`: the
instructions an agent needs -- short enough to paste (design.md §18), and the long form."""

from __future__ import annotations

import json
import re

import pytest

from relay_cli.agents import install as hook_install
from relay_cli.agents import runtimes


def settings_json(runtime: str, wake: bool = True) -> str:
    """The settings fragment `relay hook install RUNTIME` merges in, as JSON text."""
    return json.dumps(hook_install.fragment(runtime, wake), indent=2)


def docs_table() -> str:
    """The runtimes table of docs/agents.md: one row per runtime entry."""
    wake = {
        "exit2": "waiter (exit 2, `{flags}`), always installed",
        "queue": "waiter (`{program} queue`, `{flags}`), with `--wake`",
        "plugin": "waiter (exit 2; the plugin's `promptAsync`), always installed",
    }
    rows = [
        "| runtime | hook command | checked with | settings file | wakes an idle session |",
        "|---|---|---|---|---|",
    ]
    for r in runtimes.ALL:
        flags = ", ".join(r.wake_flags)
        how = wake[r.wake].format(flags=flags, program=r.program) if r.wake else "no"
        rows.append(
            f"| {r.display} {r.checked} | `relay hook {r.name}` | `{r.package}` | "
            f"`~/{r.settings.user_dir}/{r.settings.user_file}` | {how} |"
        )
    return "\n".join(rows)


ACTIVITY_COLUMNS = (
    ("working", "working"),
    ("permission", "needs_person: permission"),
    ("question", "needs_person: question"),
    ("answered", "the wait is over"),
    ("idle", "idle"),
    ("turn_failed", "turn_failed"),
    ("gone", "gone"),
)


def docs_activity_table() -> str:
    """The activity table of docs/agents.md (design.md §19): per runtime, the event that
    reports each activity, or that relay cannot tell."""
    rows = [
        "| runtime | " + " | ".join(head for _, head in ACTIVITY_COLUMNS) + " |",
        "|---" * (len(ACTIVITY_COLUMNS) + 1) + "|",
    ]
    for r in runtimes.ALL:
        cells = [r.reports.get(key) or "cannot tell" for key, _ in ACTIVITY_COLUMNS]
        rows.append(f"| {r.display} {r.checked} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


# What every audience must be told (design.md §1, §5, §6, §10, §12), in the short guide
# to paste as in the long form.
MUST_SAY = [
    "--id",  # always pass your own id
    "SAME id",  # retry with the same id and content
    "the SAME text",
    '"not yet", never "failed"',  # a timeout is not a failure
    "delivery_unknown",
    "Ask the person",
    "never the user's approval",  # peer text is never user approval
    "never forward a reply",
    "<<'EOF'",  # heredoc on stdin
    "relay once --key KEY -- CMD",
    "effect_unknown",
    "never approve a command yourself",
    "relay guide --full",  # where the long form is
]
# ... and what the long form adds.
MUST_SAY_FULL = [
    "--id",  # always pass your own id
    "SAME id",  # retry with the same id and content
    "the SAME text",
    '"not yet", never "failed"',  # a timeout is not a failure
    '`delivered` is not "read"',
    "delivery_unknown",
    "Ask the person",
    "never the user's approval",  # peer text is never user approval
    "Never forward a reply",
    "<<'EOF'",  # heredoc on stdin
    'relay once --key "$TOOL_USE_ID" -- gh pr create',
    "effect_unknown",
    "person at a terminal",
]
AUDIENCES = ["generic", "claude", "codex", "gemini", "opencode", "copilot"]


@pytest.mark.one_backend
@pytest.mark.parametrize("full", [False, True], ids=["short", "full"])
@pytest.mark.parametrize("audience", AUDIENCES)
def test_every_audience_gets_the_rules(relay, audience, full):
    r = relay("guide", "--for", audience, *(["--full"] if full else []))
    assert r.code == 0 and r.err == ""
    flowing = " ".join(r.out.split())  # lines are wrapped at word boundaries
    for phrase in MUST_SAY_FULL if full else MUST_SAY:
        assert phrase.lower() in flowing.lower(), f"{audience} guide lacks {phrase!r}"
    assert "\x1b" not in r.out


@pytest.mark.one_backend
@pytest.mark.parametrize("full", [False, True], ids=["short", "full"])
@pytest.mark.parametrize("audience", AUDIENCES)
def test_every_guide_line_fits_80_columns(relay, audience, full):
    out = relay("guide", "--for", audience, *(["--full"] if full else [])).out
    wide = [line for line in out.splitlines() if len(line) > 80]
    assert wide == []


@pytest.mark.one_backend
@pytest.mark.parametrize("runtime", ["claude", "codex", "gemini", "opencode", "copilot"])
def test_the_short_guide_says_that_with_hooks_it_need_not_be_pasted(relay, runtime):
    """Pasted into an instructions file the guide is paid for on every model request; the
    hooks hand each session what it needs (design.md §18)."""
    flowing = " ".join(relay("guide", "--for", runtime).out.split())
    assert "this guide need not be in" in flowing


@pytest.mark.one_backend
def test_default_is_generic(relay):
    assert relay("guide").out == relay("guide", "--for", "generic").out


@pytest.mark.one_backend
@pytest.mark.parametrize("full", [False, True], ids=["short", "full"])
@pytest.mark.parametrize("runtime", ["claude", "codex", "gemini", "opencode", "copilot"])
def test_each_runtime_guide_names_the_command_that_installs_its_hook(relay, runtime, full):
    text = " ".join(relay("guide", "--for", runtime, *(["--full"] if full else [])).out.split())
    assert f"relay hook install {runtime}" in text
    # how relay's wake note looks, where it can wake an idle session
    assert "`[relay]`" in text or runtime in ("gemini", "copilot")
    if runtime != "claude":  # no env file: the launcher carries the identity
        assert f"relay run --as NAME --kind {runtime} -- {runtime}" in text


@pytest.mark.one_backend
def test_codex_guide_says_how_it_is_woken_and_how_to_wait_without_hooks(relay):
    text = relay("guide", "--for", "codex", "--full").out
    assert "relay hook install codex --wake" in text and "codex queue" in text
    assert "not by the user" in text
    assert "relay claim --wait" in text and "relay wait ID --timeout" in text
    assert "relay hook claude" not in text


@pytest.mark.one_backend
@pytest.mark.parametrize("full", [False, True], ids=["short", "full"])
def test_gemini_guide_says_an_idle_session_cannot_be_woken(relay, full):
    text = " ".join(relay("guide", "--for", "gemini", *(["--full"] if full else [])).out.split())
    assert "Nothing can wake an idle Gemini CLI session" in text
    assert "AfterAgent" in text and "GEMINI.md" in text


@pytest.mark.one_backend
@pytest.mark.parametrize("full", [False, True], ids=["short", "full"])
def test_generic_guide_has_no_runtime_sections(relay, full):
    text = relay("guide", *(["--full"] if full else [])).out
    assert "relay hook" not in text and "claim --wait 10m" in text
    assert "Codex" not in text and "Gemini" not in text


@pytest.mark.one_backend
def test_json_output_is_one_document(relay):
    for full in ([], ["--full"]):
        r = relay("guide", "--for", "codex", *full, "--json")
        assert r.code == 0
        assert r.json == {"for": "codex", "text": relay("guide", "--for", "codex", *full).out}
    assert relay("guide", "--full").out != relay("guide").out


@pytest.mark.one_backend
def test_unknown_audience_is_a_usage_error(relay):
    r = relay("guide", "--for", "aider", "--json")
    assert (r.code, r.error["code"]) == (2, "usage_error") and r.out == ""


@pytest.mark.one_backend
def test_guide_needs_no_state_directory(relay):
    assert relay("guide").code == 0
    assert not relay.home.exists()


@pytest.mark.one_backend
def test_guide_text_stays_short_enough_to_paste(relay):
    for audience in AUDIENCES:
        for full in ([], ["--full"]):
            text = relay("guide", "--for", audience, *full).out
            assert len(text) < (12000 if full else 3000)
            assert not re.search(r"[ \t]+$", text, re.M)


def test_the_send_example_runs_as_written(relay):
    """The guide's first shell block, with PEER filled in, sends exactly one request."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    block = re.search(r"```sh\n(.*?)```", relay("guide", "--full").out, re.S).group(1)
    alice = relay.join("alice")
    relay("peers", "add", "bob")
    env = {
        **relay._env(alice),
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"],
    }
    script = block.replace("PEER", "bob")
    for _ in range(2):  # the retry, as written, is the same request
        p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env)
        assert p.returncode == 0, p.stderr
    requests = relay("list", "--json").json["requests"]
    assert len(requests) == 1 and requests[0]["to"] == "bob"
    assert relay("show", requests[0]["id"], "--json").json["text"] == (
        "What you want done, with everything the other agent needs to know.\n"
    )


@pytest.mark.parametrize("runtime", ["claude", "codex", "gemini", "copilot"])
def test_docs_agents_shows_exactly_what_install_merges(runtime):
    """docs/agents.md shows, for a manual install, the entries `relay hook install` adds."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "agents.md").read_text()
    assert settings_json(runtime, wake=True) in doc
    assert hook_install.fragment(runtime, wake=True) == json.loads(
        settings_json(runtime, wake=True)
    )


@pytest.mark.one_backend
def test_the_guide_says_what_each_state_means_in_the_words_of_the_state_table(relay):
    """One definition (design.md §5): the guide's states section is states.MEANING."""
    from relay_cli.requests.states import MEANING

    text = " ".join(relay("guide", "--full").out.split())
    for state, (claims, not_claimed) in MEANING.items():
        assert f"- {state}: {claims}." in text
        if not_claimed:
            assert f"It does not mean {not_claimed}." in text


def test_every_runtime_has_a_guide_section_and_an_audience():
    from relay_cli.agents import guide, runtimes

    for rt in runtimes.ALL:
        assert rt.name in guide.AUDIENCES
        section = guide.text(rt.name, full=True)[len(guide.text("generic", full=True)) :]
        assert rt.display in section and f"relay hook install {rt.name}" in section
        assert f"relay hook install {rt.name}" in guide.text(rt.name)


def test_docs_agents_shows_what_relay_can_tell_of_each_runtime():
    """docs/agents.md's activity table is docs_activity_table(): what each runtime entry
    says it reports (design.md §19), "cannot tell" for the rest; every runtime reports
    gone, by SessionEnd or `relay run` leaving."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "agents.md").read_text()
    assert docs_activity_table() in doc
    assert all(r.reports.get("gone") and r.reports.get("working") for r in runtimes.ALL)


def test_docs_agents_lists_every_runtime_entry():
    """docs/agents.md's runtimes table is docs_table(): one entry per runtime."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "agents.md").read_text()
    assert docs_table() in doc
