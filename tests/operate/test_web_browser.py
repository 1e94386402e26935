"""`relay web`'s page in a real browser (design.md §17): Debian's chromium, headless, one
for the module (testsupport/browser.py), looking at `relay web` run as a real process.

Skipped when chromium or chromedriver is missing, unless RELAY_REQUIRE_BROWSER=1 (CI,
which installs them). With RELAY_WEB_SCREENSHOTS=DIR the layout test keeps its
screenshots there (docs/web.md shows them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import Relay, new_id
from test_web import HOSTILE, HOSTILE_TOOL, agents_need_a_person, busy_web_home, web

from testsupport import browser as browsers
from testsupport.browser import REBIND_HOST, Browser

if browsers.missing() and os.environ.get("RELAY_REQUIRE_BROWSER") != "1":
    pytest.skip(browsers.missing() or "", allow_module_level=True)

SIZES = ((1280, 800), (390, 844))  # a laptop's screen and a phone's
LIVE = "return !!document.querySelector('#live .ok')"


@pytest.fixture(scope="module")
def chromium():
    b = Browser(*SIZES[0])
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def one_home(tmp_path) -> Relay:
    """A relay home on SQLite, for what does not depend on where the requests are kept."""
    return Relay(tmp_path / "relay-home")


@pytest.fixture
def page(chromium):
    """The module's browser at a laptop's size on a blank page, its console read empty
    first; left on a blank page (an earlier test's page would go on reconnecting)."""
    chromium.go("about:blank")
    chromium.viewport(*SIZES[0])
    chromium.console()
    yield chromium
    chromium.go("about:blank")


def open_view(b: Browser, served) -> None:
    b.go(served.url)
    assert b.wait_for(LIVE), b.run("return document.body.innerText")


def ids_in(b: Browser, selector: str) -> list[str]:
    return b.run(
        "return [...document.querySelectorAll(arguments[0])].map(e => e.dataset.id)", selector
    )


def problems(b: Browser) -> list[str]:
    """What the page's console says went wrong: a blocked script or style, a failed load."""
    return [m["message"] for m in b.console() if m["level"] in ("SEVERE", "WARNING")]


# ------------------------------------------------------------------ the truth, live
def test_the_page_shows_what_the_database_holds(relay, page):
    ids = busy_web_home(relay)
    with web(relay) as served:
        open_view(page, served)
        text = page.run("return document.body.innerText")
        assert page.run("return document.querySelector('#summary').textContent") == (
            "1 delivery_unknown, 1 effect_unknown, 1 awaiting approval; 3 open"
        )
        needs = page.run(
            "return [...document.querySelectorAll('#needs .alert')].map(a => a.dataset.section)"
        )
        assert needs == ["delivery_unknown", "effect_unknown", "awaiting_approval"]
        assert ids_in(page, "#needs li.request") == [ids["lost"]]
        for lane, key in (
            ("queued", "queued"),
            ("delivered", "delivered"),
            ("acknowledged", "acked"),
            ("recently_final", "done"),
        ):
            assert ids_in(page, f"[data-lane={lane}] li.request") == [ids[key]], lane
        commands = page.run(
            "return [...document.querySelectorAll('#needs li.command code')]"
            ".map(c => c.textContent)"
        )
        assert [c.split(" --")[0] + " --" + c.split(" --")[1] for c in commands[:3]] == [
            f"relay resolve {ids['lost']} --outcome {o}" for o in ("completed", "failed", "requeue")
        ]
        assert commands[5].startswith("relay ledger resolve migrate-1 --outcome forget")
        assert commands[6].startswith("relay approve deploy-1") and len(commands) == 8
        for name in ("alice", "bob", "carol", "dave", "erin"):
            assert name in text
        assert text.count("activity unknown") == 5
        assert "deploy-1" in page.run("return document.querySelector('#ledger').innerText")
        # nothing from anywhere but relay web itself, and nothing refused or broken
        sources = page.run(
            "return performance.getEntriesByType('resource').map(e => e.name)"
            ".concat([location.href])"
        )
        assert sources and all(s.startswith(served.base + "/") for s in sources), sources
        # long words (this test's home, a database URL) fit too
        for width, height in SIZES:
            page.viewport(width, height)
            assert page.wait_for("return window.innerWidth === arguments[0]", width)
            assert page.run(LAYOUT) == [], (width, height)
        assert problems(page) == []


def test_a_request_sent_after_the_page_loaded_appears_within_a_second(relay, page):
    alice = relay.join("alice")
    relay.join("bob")
    with web(relay) as served:
        open_view(page, served)
        rid = new_id()
        page.run(
            """
            const id = arguments[0];
            window.__seen = null;
            new MutationObserver((_, observer) => {
              if (document.querySelector('[data-lane=queued] li[data-id="' + id + '"]')) {
                window.__seen = Date.now();
                observer.disconnect();
              }
            }).observe(document.body, {childList: true, subtree: true});
            """,
            rid,
        )
        assert relay.send(alice, "bob", "new work", request_id=rid).code == 0
        committed = time.time() * 1000  # (the send returns after its COMMIT)
        seen = page.wait_for("return window.__seen", timeout=10)
        assert seen, "the request never appeared"
        latency = (seen - committed) / 1000
        assert latency < 1.0, latency
        assert problems(page) == []


def test_focus_and_an_open_text_survive_a_live_update(one_home, page):
    alice = one_home.join("alice")
    one_home.join("bob")
    first = new_id()
    one_home.send(alice, "bob", "the first request's words", request_id=first)
    with web(one_home) as served:
        open_view(page, served)
        page.run(f"document.querySelector('[data-key=\"text:{first}\"]').click()")
        assert page.wait_for("return document.querySelector('pre.text')")
        page.run(f"document.querySelector('[data-key=\"text:{first}\"]').focus()")
        one_home.send(alice, "bob", "a second one")
        assert page.wait_for("return document.querySelectorAll('li.request').length === 2")
        assert page.run("return document.activeElement.dataset.key") == f"text:{first}"
        assert page.run("return document.querySelector('pre.text').textContent") == (
            "the first request's words"
        )
        # the text came in an answer: no URL the page asked for carries it
        urls = page.run("return performance.getEntriesByType('resource').map(e => e.name)")
        assert any("/text?" in u for u in urls)
        assert not any("words" in u for u in urls), urls


# ------------------------------------------------------------------ inert and private
def test_hostile_text_runs_nothing_and_shows_as_text(one_home, page):
    alice = one_home.join("alice")
    one_home.join("bob")
    rid = new_id()
    assert one_home.send(alice, "bob", HOSTILE, request_id=rid).code == 0
    key = "<img/src=x/onerror=document.title='pwned'>"
    r = one_home.proc("once", "--approve", "--timeout", "0", "--key", key, "--", "echo", "<b>x</b>")
    assert r.code == 75, r.err
    with web(one_home) as served:
        open_view(page, served)
        page.run(f"document.querySelector('[data-key=\"text:{rid}\"]').click()")
        shown = page.wait_for(
            "const p = document.querySelector('pre.text'); return p && p.textContent"
        )
        time.sleep(0.3)  # (time for anything that would run)
        assert page.run("return document.title") != "pwned"
        assert page.run("return document.querySelectorAll('img, b, script:not([src])').length") == 0
        assert page.run("return document.scripts.length") == 1  # app.js alone
        # the text as text: markup literal, control and bidi characters visible escapes
        assert shown.startswith("<script>document.title='pwned'</script><img src=x onerror=")
        assert "\\u202eevil\\u202c" in shown and "\\x1b[31mred" in shown and "\\x07" in shown
        assert "\u202e" not in shown and "\x1b" not in shown
        needs = page.run("return document.querySelector('#needs').innerText")
        assert key in needs and "echo '<b>x</b>'" in needs
        # its copy button copies the command exactly, the key one shell word
        page.cdp(
            "Browser.grantPermissions",
            {
                "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"],
                "origin": served.base,
            },
        )
        page.run("document.querySelector('[data-section=awaiting_approval] button.copy').click()")
        assert page.wait_for(
            "return document.querySelector('[data-section=awaiting_approval] button.copy')"
            ".textContent === 'copied'"
        )
        copied = page.run("return navigator.clipboard.readText()")
        command = page.run(
            "return document.querySelector('[data-section=awaiting_approval] li.command code')"
            ".textContent"
        )
        assert copied == command
        assert copied.startswith("relay approve '<img/src=x/onerror=document.title='\"'\"'pwned")
        assert "Text from alice: a message from another agent, not your approval." in (
            page.run("return document.body.innerText")
        )
        assert problems(page) == []


def test_an_agent_that_needs_a_person_appears_and_its_tool_name_stays_text(one_home, page):
    """design.md §17, §19: the agents that wait for a person open the needs-person
    section, longest first, with the requests they hold; the tool name a runtime reported
    (markup, bidi and control characters) runs nothing and shows as inert text; a new wait
    appears live."""
    ids = agents_need_a_person(one_home)
    with web(one_home) as served:
        open_view(page, served)
        assert page.run("return document.querySelector('#summary').textContent") == (
            "2 agents need you; 1 open"
        )
        assert page.run("return document.title") == "(2) relay"
        sections = page.run(
            "return [...document.querySelectorAll('#needs .alert')].map(a => a.dataset.section)"
        )
        assert sections == ["agents"]
        agents = page.run(
            "return [...document.querySelectorAll('#needs li.agent')].map(a => a.dataset.peer)"
        )
        assert agents == ["claude-1", "codex-1"]  # longest first
        first = page.run("return document.querySelector('#needs li.agent').innerText")
        assert "needs_person: permission" in first and "since" in first
        held = page.run("return document.querySelector('#needs li.agent code.id')")
        assert page.run("return arguments[0].title", held) == ids["held"]
        shown = page.run("return document.querySelector('#needs li.agent .detail').textContent")
        time.sleep(0.3)  # (time for anything that would run)
        assert page.run("return document.title") == "(2) relay"
        assert page.run("return document.querySelectorAll('img, script:not([src])').length") == 0
        assert page.run("return document.scripts.length") == 1  # app.js alone
        assert shown.startswith("<img src=x onerror=") and "$(touch${IFS}x)" in shown
        assert "\\u202eevil\\u202c" in shown and "\\x1b[31mred" in shown
        assert "\u202e" not in shown and "\x1b" not in shown
        assert HOSTILE_TOOL not in page.run("return document.body.innerText")
        peers = page.run("return document.querySelector('#peers').innerText")
        assert "activity needs_person: permission" in peers and "activity working" in peers
        # gemini-1 asks too: it appears within a second or so, after the two
        fixture = Path(__file__).parents[1] / "fixtures" / "gemini" / "notification.json"
        r = one_home("hook", "gemini", input=fixture.read_text(), env=ids["gemini"])
        assert (r.code, r.out) == (0, ""), r
        assert page.wait_for("return document.querySelectorAll('#needs li.agent').length === 3")
        assert (
            page.run("return document.querySelector('#needs li.agent:last-child').dataset.peer")
            == "gemini-1"
        )
        assert "asked" in page.run(
            "return document.querySelector('#needs li.agent:last-child').innerText"
        )  # Gemini CLI sends no event when the person answers: when it asked, not how long
        assert problems(page) == []


def test_a_wrong_token_and_a_foreign_host_are_refused(one_home, page):
    one_home.join("alice")
    with web(one_home) as served:
        for url in (
            f"{served.base}/",
            f"{served.base}/?token=wrong",
            f"{served.base}/?token={served.token[:-2]}",
            f"http://{REBIND_HOST}:{served.port}/?token={served.token}",  # DNS rebinding
        ):
            page.go(url)
            body = page.run("return document.body.innerText")
            assert body.startswith("403 refused"), (url, body)
            assert page.run("return document.querySelector('#summary')") is None
        open_view(page, served)  # the printed address itself works
        page.console()


def test_the_page_says_when_it_is_no_longer_live(one_home, page):
    """The view stopped: the page says it is reconnecting; a new run on the same port has
    a new token, refuses the page, and the page says it is not live any more."""
    one_home.join("alice")
    with web(one_home) as served:
        open_view(page, served)
        port = served.port
    live = "return document.querySelector('#live').textContent"
    assert page.wait_for(live + ".startsWith('reconnecting')")
    with web(one_home, "--port", str(port)):
        assert page.wait_for(live + ".startsWith('not live')", timeout=10)
    page.console()  # (the refused reconnection is in it)


# ------------------------------------------------------------------ layout
LAYOUT = """
const width = window.innerWidth, found = [];
const shown = (e) => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
if (document.documentElement.scrollWidth > width) found.push('page wider than the screen: '
    + document.documentElement.scrollWidth);
for (const e of document.body.querySelectorAll('*')) {
  if (!shown(e) || e.closest('.offscreen')) continue;
  const r = e.getBoundingClientRect();
  if (r.left < -0.5 || r.right > width + 0.5) found.push('outside: ' + e.tagName + '.'
      + e.className + ' ' + Math.round(r.left) + '..' + Math.round(r.right));
  const style = getComputedStyle(e);
  if (style.display !== 'inline' && e.scrollWidth > e.clientWidth + 1
      && style.overflowX !== 'auto' && style.overflowX !== 'scroll')
    found.push('cut: ' + e.tagName + '.' + e.className + ' ' + e.scrollWidth + '>' + e.clientWidth);
}
const boxes = [...document.querySelectorAll(
  'h1, h2, h3, #summary, .meta, ul.rows > li, ul.events > li, li.command > code, ' +
  'li.command > button, .show-text, pre.text, .lane, .alert, .more')].filter(shown);
for (let i = 0; i < boxes.length; i++) {
  for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i], b = boxes[j];
    if (a.contains(b) || b.contains(a)) continue;
    const p = a.getBoundingClientRect(), q = b.getBoundingClientRect();
    const x = Math.min(p.right, q.right) - Math.max(p.left, q.left);
    const y = Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top);
    if (x > 0.5 && y > 0.5) found.push('overlap: ' + a.tagName + '.' + a.className + ' / '
        + b.tagName + '.' + b.className);
  }
}
return found;
"""


def busy_team(relay: Relay) -> dict[str, str]:
    """A busy afternoon of five agents and a person, as docs/web.md shows it."""

    def join(name: str, kind: str) -> dict:
        return relay.join(name, "--kind", kind, "--lease", "24h")

    front, back = join("claude-frontend", "claude"), join("codex-backend", "codex")
    docs, bot = join("gemini-docs", "gemini"), join("reviewer-bot", "opencode")
    relay("peers", "add", "ops-person", "--kind", "human")
    ids = {name: new_id() for name in ("health", "document", "hostile", "limits", "review")}
    ids |= {name: new_id() for name in ("lock", "flaky", "migrate")}
    sends = [
        (front, "codex-backend", "health", "Add a /health endpoint to the API; reply with it."),
        (back, "gemini-docs", "document", "Document the /health endpoint in docs/api.md."),
        (front, "reviewer-bot", "hostile", HOSTILE),
        (docs, "codex-backend", "limits", "Check the rate limiter's settings on staging."),
        (bot, "claude-frontend", "review", "Review PR 412: the login form's refactor."),
        (front, "codex-backend", "lock", "Bump the lockfile."),
        (back, "reviewer-bot", "flaky", "Run the flaky end-to-end suite again."),
        (front, "gemini-docs", "migrate", "Run the database migration on staging."),
    ]
    for who, to, name, text in sends:
        extra = ("--reply-within", "2h") if name == "review" else ()
        assert relay.send(who, to, text, *extra, request_id=ids[name]).code == 0
    relay("claim", "--id", ids["limits"], "--lease", "30m", env=back)
    relay("claim", "--id", ids["review"], env=front)
    relay("ack", ids["review"], env=front)
    relay("claim", "--id", ids["lock"], env=back)
    relay("reply", ids["lock"], "-", input="Done: the lockfile is bumped.", env=back)
    relay("claim", "--id", ids["flaky"], env=bot)
    relay("fail", ids["flaky"], "--reason", "tests are red on main", env=bot)
    relay("claim", "--id", ids["migrate"], env=docs)
    relay("peers", "leave", env=docs)  # it left holding the work: delivery_unknown
    # claude-frontend, holding the review, waits for the person to allow a command
    fixture = Path(__file__).parents[1] / "fixtures" / "claude" / "permission_request.json"
    asks = {**json.loads(fixture.read_text()), "session_id": "frontend-session"}
    r = relay("hook", "claude", input=json.dumps(asks), env={**front, "CLAUDE_ENV_FILE": ""})
    assert (r.code, r.out) == (0, ""), r
    project = relay.home.parent / "api"  # (where the person's `relay once` ran)
    project.mkdir()
    r = subprocess.run(
        [sys.executable, "-m", "relay_cli", "once", "--approve", "--timeout", "0"]
        + ["--key", "deploy-api-v2", "--", "./deploy.sh", "--env", "production"],
        env=relay._env(None),
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 75, r.stderr
    return ids


def test_the_busy_page_fits_a_laptop_and_a_phone(page, tmp_path):
    """At 1280x800 and 390x844: nothing wider than the screen, nothing cut, nothing
    overlapping, every action a button; the screenshots are docs/web.md's."""
    short = Path(tempfile.mkdtemp(prefix="relay-"))  # (a home path as a person's is short)
    try:
        relay = Relay(short / "home")
        ids = busy_team(relay)
        keep = os.environ.get("RELAY_WEB_SCREENSHOTS")
        with web(relay) as served:
            open_view(page, served)
            page.run(f"document.querySelector('[data-key=\"text:{ids['health']}\"]').click()")
            assert page.wait_for("return document.querySelector('pre.text')")
            for width, height in SIZES:
                page.viewport(width, height)
                assert page.wait_for("return window.innerWidth === arguments[0]", width)
                page.run("window.scrollTo(0, 0)")
                assert page.run(LAYOUT) == [], (width, height)
                # every action is a button, reachable by the keyboard
                assert page.run(
                    "return [...document.querySelectorAll('[data-key]')]"
                    ".every(e => e.tagName === 'BUTTON' && e.tabIndex === 0)"
                )
                # the laptop's whole page; the phone's first screen
                png = page.screenshot(tmp_path / f"web-{width}.png", full_page=width > 600)
                assert png.startswith(b"\x89PNG") and len(png) > 10_000
                if keep:
                    Path(keep, f"web-{width}.png").write_bytes(png)
            assert problems(page) == []
    finally:
        shutil.rmtree(short, ignore_errors=True)
