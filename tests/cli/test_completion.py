"""Shell completion offers what a command accepts (design.md §14), from a read-only look
that never applies due transitions and never creates a home.

Each test runs the completion machinery as bash's completion function does (the
generated completions/relay.bash): COMP_WORDS, COMP_CWORD and _RELAY_COMPLETE=complete_bash
in the environment of a `relay` call, the shell given explicitly. The calls run in-process
(``relay_cli.cli.run`` returns the completion's exit status, as for any call): what is
offered is decided there. The real path -- bash sourcing the generated script, which starts
a real `relay` process -- is test_generated's.
"""

from __future__ import annotations

import pytest
from conftest import new_id

from relay_cli.core.errors import ERRORS
from relay_cli.core.limits import KINDS, STATES


def complete(relay, line: str, env: dict | None = None) -> list[str]:
    """What `relay` offers for the last word of ``line`` (a trailing space: a new word)."""
    words = line.split()
    cword = len(words) if line.endswith(" ") else len(words) - 1
    extra = {
        "_RELAY_COMPLETE": "complete_bash",
        "COMP_WORDS": line,
        "COMP_CWORD": str(cword),
        "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1",
    }
    r = relay(env={**(env or {}), **extra})
    assert r.code == 0, r.err
    assert r.err == ""
    return [w for w in r.out.splitlines() if w]


@pytest.fixture
def mix(relay):
    """alice sent three requests to bob: one queued, one bob claimed, one delivery_unknown;
    carol claimed one of her own."""
    alice = relay.join("alice", "--lease", "1h")
    bob = relay.join("bob", "--lease", "1h")
    carol = relay.join("carol", "--lease", "1h")
    ids = {}
    for name in ("lost", "claimed", "queued"):
        ids[name] = new_id()
        assert relay.send(alice, "bob", name, request_id=ids[name]).code == 0
        if name == "lost":
            assert relay("claim", "--id", ids[name], "--lease", "10s", env=bob).code == 0
            assert relay("sweep", env={"RELAY_TIME_OFFSET": "20"}).code == 0
        if name == "claimed":
            assert relay("claim", "--id", ids[name], env=bob).code == 0
    ids["carols"] = new_id()
    assert relay.send(alice, "carol", "c", request_id=ids["carols"]).code == 0
    assert relay("claim", env=carol).code == 0
    relay.env["RELAY_TIME_OFFSET"] = "20"
    return relay, alice, bob, carol, ids


def test_resolve_offers_only_delivery_unknown_ids(mix):
    relay, alice, bob, carol, ids = mix
    assert complete(relay, "relay resolve ") == [ids["lost"]]
    assert complete(relay, f"relay resolve {ids['lost'][:4]}") == [ids["lost"]]
    assert complete(relay, "relay resolve zz") == []


def test_ack_reply_fail_reject_offer_what_my_session_claimed(mix):
    relay, alice, bob, carol, ids = mix
    for command in ("ack", "reply", "fail", "reject"):
        assert complete(relay, f"relay {command} ", env=bob) == [ids["claimed"]]
        assert complete(relay, f"relay {command} ", env=carol) == [ids["carols"]]
        assert complete(relay, f"relay {command} ", env=alice) == []
    # --session on the command line counts too
    token = bob["RELAY_SESSION"]
    assert complete(relay, f"relay ack --session {token} ") == [ids["claimed"]]


def test_completion_knows_the_caller_by_the_commands_own_rule(mix):
    """--as a peer other than RELAY_PEER: the shell's RELAY_SESSION is not that peer's token,
    for the command (peers.identity) and so for completion, which offers nothing the
    command would take as carol's."""
    relay, alice, bob, carol, ids = mix
    assert complete(relay, "relay ack --as bob ", env=carol) == []
    assert complete(relay, "relay ack --as carol ", env=carol) == [ids["carols"]]


def test_cancel_offers_my_queued_requests_and_claim_id_what_is_queued_for_me(mix):
    relay, alice, bob, carol, ids = mix
    assert complete(relay, "relay cancel ", env=alice) == [ids["queued"]]
    assert complete(relay, "relay cancel ", env=bob) == []
    assert complete(relay, "relay cancel --as alice ") == [ids["queued"]]
    assert complete(relay, "relay claim --id ", env=bob) == [ids["queued"]]
    assert complete(relay, "relay claim --id ", env=carol) == []


def test_show_and_wait_offer_any_recent_request_newest_first(mix):
    relay, alice, bob, carol, ids = mix
    every = [ids["carols"], ids["queued"], ids["claimed"], ids["lost"]]
    assert complete(relay, "relay show ") == every
    assert complete(relay, "relay wait ") == every
    rid = ids["claimed"]
    assert complete(relay, f"relay show {rid[:9]}") == [rid]


def test_submit_offers_my_unsubmitted_drafts(mix):
    relay, alice, bob, carol, ids = mix
    draft = relay("prepare", "--to", "bob", "later", "--json", env=alice).json["id"]
    assert complete(relay, "relay submit ", env=alice) == [draft]
    assert complete(relay, "relay submit ", env=bob) == []
    assert relay("submit", draft, env=alice).code == 0
    assert complete(relay, "relay submit ", env=alice) == []


def test_peer_names_are_offered_where_a_peer_belongs(mix):
    relay, *_ = mix
    for line in (
        "relay send --to ",
        "relay list --from ",
        "relay list --to ",
        "relay inbox --as ",
        "relay peers join ",
        "relay run --as ",
    ):
        assert complete(relay, line) == ["alice", "bob", "carol"], line
    assert complete(relay, "relay send --to c") == ["carol"]


@pytest.mark.one_backend
@pytest.mark.parametrize(
    "line,expected",
    [
        ("relay list --state ", list(STATES)),
        ("relay list --state deli", ["delivered", "delivery_unknown"]),
        ("relay resolve x --outcome ", ["completed", "failed", "requeue"]),
        ("relay ledger resolve k --outcome ", ["succeeded", "failed", "forget"]),
        ("relay ledger list --state eff", ["effect_unknown"]),
        ("relay peers join x --kind ", list(KINDS)),
        ("relay peers add x --kind c", ["claude", "codex", "copilot"]),
        ("relay run --as x --kind h", ["human"]),
        ("relay send --to x --on-lost ", ["unknown", "redeliver"]),
        ("relay guide --for c", ["claude", "codex", "copilot"]),
    ],
)
def test_choices_are_offered(relay, line, expected):
    assert complete(relay, line) == expected


@pytest.mark.one_backend
def test_choices_are_shown_in_help(relay):
    assert (
        "--kind <claude|codex|gemini|opencode|copilot|aider|human|script|other>"
        in relay("peers", "join", "--help").out
    )
    assert "--outcome <completed|failed|requeue>" in relay("resolve", "--help").out
    assert "--on-lost <unknown|redeliver>" in relay("send", "--help").out


@pytest.mark.one_backend
@pytest.mark.parametrize(
    "args,code",
    [
        (["peers", "join", "x", "--kind", "Claude"], "invalid_name"),
        (["peers", "add", "x", "--kind", "robot"], "invalid_name"),
        (["send", "--to", "x", "--on-lost", "never", "hi"], "usage_error"),
        (["list", "--state", "done"], "usage_error"),
        (["resolve", new_id(), "--outcome", "maybe"], "usage_error"),
        (["ledger", "list", "--state", "done"], "usage_error"),
        (["ledger", "resolve", "k", "--outcome", "maybe"], "usage_error"),
        (["guide", "--for", "vim"], "usage_error"),
    ],
)
def test_a_bad_choice_is_still_relays_own_error(relay, args, code):
    relay.join("alice")
    before = relay.snapshot()
    r = relay(*args, "--json", env={"RELAY_PEER": "alice"})
    assert r.error["code"] == code, r.err
    assert r.code == ERRORS[code].exit_code
    assert r.error["hint"].startswith(ERRORS[code].hint)
    assert relay.snapshot() == before


def test_completion_applies_no_due_transition_and_writes_nothing(mix):
    relay, alice, bob, carol, ids = mix
    before = relay.snapshot()
    local = relay.backend == "sqlite"  # on PostgreSQL the home holds nothing at all
    files = sorted(p.name for p in relay.home.iterdir()) if local else None
    # an hour later the queued request's TTL has passed, and bob's claim lease too
    later = {"RELAY_TIME_OFFSET": "7200"}
    assert ids["queued"] in complete(relay, "relay cancel ", env={**alice, **later})
    assert complete(relay, "relay show ", env=later)
    assert relay.snapshot() == before
    assert (sorted(p.name for p in relay.home.iterdir()) if local else None) == files


def test_completion_never_creates_a_home(relay):
    assert complete(relay, "relay show ") == []
    assert complete(relay, "relay send --to ") == []
    assert complete(relay, "relay peers join x --kind h") == ["human"]
    assert not relay.home.exists()


@pytest.mark.sqlite_only  # the state directory's safety rules (design.md §2)
def test_completion_in_an_unsafe_home_offers_nothing_and_says_nothing(relay):
    relay.join("alice")
    relay.home.chmod(0o755)  # group and others may read: relay refuses it
    try:
        assert complete(relay, "relay send --to ") == []
    finally:
        relay.home.chmod(0o700)
