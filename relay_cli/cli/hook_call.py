"""`relay hook RUNTIME`, answered without Typer (design.md §18).

A runtime runs relay's hooks on every turn of every session, so their start-up is paid
many times an hour: this path reads the few words a hook's command line has (the ones
`relay hook install` writes, and every option of `relay hook RUNTIME`) by itself, and
imports neither Typer nor rich. Anything else -- help, a word it does not know, a value it
would have to refuse -- goes to the command line (``call``), which answers it as it always
has; so the behaviour and the errors are the same either way (tests/agents/
test_hook_startup.py runs both). ``answer`` is also what the Typer command runs.
"""

from __future__ import annotations

from ..core.limits import MAX_HOOK_INPUT_BYTES

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)

if TYPE_CHECKING:
    from ..core.context import Context

# the options of `relay hook RUNTIME` that take a value, and its flags
# (hook_cmd.py declares them for the command line; a test checks both agree)
VALUE_OPTIONS = {
    "--as": "as_",
    "--kind": "kind",
    "--lease": "lease",
    "--timeout": "timeout",
    "--home": "home",
    "--database-url": "database_url",
}
FLAGS = {"--wake": "wake", "--json": "json_"}
# the root's options that may stand before `hook` (app.py's ROOT_VALUE_OPTIONS)
ROOT_OPTIONS = {"--home": "root_home", "--database-url": "root_database_url"}


class HookCall:
    """What a hook's command line says: the runtime and its options (None: not given)."""

    __slots__ = (
        "runtime",
        "as_",
        "kind",
        "lease",
        "timeout",
        "home",
        "database_url",
        "wake",
        "json_",
        "root_home",
        "root_database_url",
    )

    def __init__(self, runtime: str) -> None:
        self.runtime = runtime
        self.as_: str | None = None
        self.kind: str | None = None
        self.lease: str | None = None
        self.timeout: str | None = None
        self.home: str | None = None
        self.database_url: str | None = None
        self.wake = False
        self.json_ = False
        self.root_home: str | None = None
        self.root_database_url: str | None = None


def _words(
    argv: list[str], i: int, known: dict[str, str], flags: dict[str, str], call: HookCall
) -> int | None:
    """Read options from ``argv[i]`` on into ``call`` until a word that is not one of them;
    the index of that word, or None when a word cannot be read here (the command line then
    reads it: a missing value, a value that looks like an option, a flag given a value)."""
    while i < len(argv):
        word = argv[i]
        name, eq, value = word.partition("=")
        if name in known and word.startswith("--"):
            if not eq:
                if i + 1 >= len(argv):
                    return None
                value = argv[i + 1]
                i += 1
            if value.startswith("-"):
                return None
            setattr(call, known[name], value)
        elif word in flags:
            setattr(call, flags[word], True)
        else:
            return i
        i += 1
    return i


def parse(argv: list[str]) -> HookCall | None:
    """``argv`` as a hook's call, or None when the command line must read it."""
    # the fast look first: most calls are not hooks
    if "hook" not in argv[:5]:
        return None
    call = HookCall("")
    i = _words(argv, 0, ROOT_OPTIONS, {}, call)
    if i is None or argv[i : i + 1] != ["hook"] or i + 1 >= len(argv):
        return None
    from ..agents.runtimes import NAMES  # (the hook's answer imports it anyway)

    if argv[i + 1] not in NAMES:
        return None  # `hook install`, `hook --help`, a runtime relay does not know
    call.runtime = argv[i + 1]
    end = _words(argv, i + 2, VALUE_OPTIONS, FLAGS, call)
    if end != len(argv):
        return None  # -h, --help, an unknown option, a word more
    if call.root_database_url is not None or call.database_url is not None:
        from ..core.errors import RelayError
        from ..store.url import check

        try:  # a URL the command line would refuse: it says so, as always
            for field in ("root_database_url", "database_url"):
                url = getattr(call, field)
                if url is not None:  # (as app.py's ``_database_url`` reads it)
                    setattr(call, field, check(url.strip()) if url.strip() else "")
        except RelayError:
            return None
    return call


def answer(ctx: Context, call: HookCall) -> int:
    """One hook run: read the event, answer on stdout. Never fails the agent: on anything
    unexpected it exits 0 and prints nothing (a waiter's exit 2 is its wake-up)."""
    from . import scope

    # as the command line applies them: the root's options, then the command's own
    for url, home in (
        (call.root_database_url, call.root_home),
        (call.database_url, None),
    ):
        if url is not None:
            scope.given(ctx, database_url=url)
        if home:
            scope.given(ctx, home=home)
    stdin = ctx.stdin
    try:
        if stdin is None or stdin.isatty():  # by hand at a terminal: there is no event
            return 0
        data = stdin.buffer.read(MAX_HOOK_INPUT_BYTES + 1)
    except (OSError, ValueError, AttributeError):
        return 0
    from ..agents import hook, hook_run
    from .env import Env

    env = Env(True, call.home, ctx=ctx)
    stdout, stderr = env.out.stdout, env.out.stderr
    doc, code, note = None, 0, ""
    try:
        event = hook.parse(data, hook.DIALECTS[call.runtime])
        if event is None:
            return 0
        doc, code, note = hook_run.respond(
            lambda: env.store,
            event,
            call.runtime,
            as_=call.as_,
            kind=call.kind,
            lease=call.lease,
            wake=call.wake,
            timeout=call.timeout,
            environ=ctx.environ,
            stderr=stderr,
        )
    except Exception as e:  # noqa: BLE001 - a hook must never break the agent
        if ctx.debug:
            import traceback

            traceback.print_exc(file=stderr)
            stderr.write(f"relay hook {call.runtime}: {type(e).__name__}: {e}\n")
        return 0
    finally:
        env.close()
    try:
        if doc is not None:
            import json

            stdout.write(json.dumps(doc, ensure_ascii=False) + "\n")
            stdout.flush()
        if note:
            stderr.write(note + "\n")
            stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass
    return code
