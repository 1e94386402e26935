"""`relay watch`: the live full-screen view for the person running the agents."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from ..core import clock
from ..core.errors import RelayError
from ..core.output import make_console, terminal_size
from .app import Env, HomeOpt, JsonOpt, app, examples, lazy_module

if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import FrameType

    from rich.console import RenderableType

    from ..operate import watch as watch_lib
    from ..operate.watch import Snapshot
else:  # executed when first used; the type checker reads it as the module it is
    watch_lib = lazy_module("relay_cli.operate.watch")

TICK_S = 0.5  # redraw at least this often (ages and leases move)
POLL_S = 0.1  # how often the database's data_version and the keyboard are checked


def _snapshot(env: Env) -> Snapshot:
    with env.unit(write=False) as now:
        snap = watch_lib.gather(env.store, now)
    return snap


@app.command(
    epilog=examples(
        "relay watch",
        "relay watch > snapshot.txt   # not a terminal: one snapshot",
    )
)
def watch(json_: JsonOpt = False, home: HomeOpt = None) -> int:
    """Live view: what needs a person first, then open requests and peers.

    Refreshes within a second of any change, fits the terminal (a section that does not
    fit says "+N more" and the command that shows the rest), writes nothing (apart from
    time-based transitions that were already due), and leaves on `q` or Ctrl-C. With
    TERM=dumb it prints a plain snapshot whenever something changes. When stdout is not
    a terminal it prints one plain snapshot (with --json: one JSON document) and exits.
    """
    env = Env(json_, home, creates=False)
    try:
        if env.json:
            env.out.json(watch_lib.json_doc(_snapshot(env)))
            return 0
        if not env.out.tty:
            snap = _snapshot(env)
            env.out.stdout.write(watch_lib.render_plain(snap, env.out.scope))
            env.out.line(f"(home {snap.home}; taken at {clock.iso(snap.now)})")
            env.out.stdout.flush()
            return 0
        if env.ctx.environ.get("TERM") == "dumb":
            return _snapshots(env)
        return _live(env)
    finally:
        env.close()


def _footer(snap: Snapshot) -> str:
    return f"{watch_lib.clock_time(snap.now)}  q or Ctrl-C: leave  home {snap.home}"


@contextlib.contextmanager
def _keyboard(stdin: TextIO | None) -> Iterator[_Keys]:
    """Single key presses from the terminal (``stdin``, the call's); SIGTERM/SIGHUP leave
    like Ctrl-C; the terminal and the handlers are restored however the view ends."""
    keys = _Keys(stdin)
    saved = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        keys.start()
        yield keys
    finally:
        keys.stop()
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def _live(env: Env) -> int:
    from rich.console import Group
    from rich.live import Live
    from rich.text import Text

    out = env.out
    console = make_console(out.stdout, out.color, None, out.environ)
    try:
        with (
            _keyboard(env.ctx.stdin) as keys,
            Live(
                console=console,
                screen=True,
                auto_refresh=False,
                redirect_stdout=False,
                redirect_stderr=False,
            ) as live,
        ):
            last_version, last_draw = None, 0.0
            rung: set[tuple[object, ...]] | None = None
            while True:
                try:
                    version = env.store.data_version()
                except RelayError:  # no home there yet (design.md §2): the line below says
                    version = None  # so, and watch keeps looking until one is made
                if version != last_version or time.monotonic() - last_draw >= TICK_S:
                    width, height = console.size
                    try:
                        snap = _snapshot(env)
                        last_version = version
                        rung = _ring(out.stdout, snap, rung)
                        view: RenderableType = Group(
                            *watch_lib.render(
                                snap,
                                width,
                                height,
                                color=out.color,
                                ellipsis=out.ellipsis,
                                footer=_footer(snap),
                                scope=env.out.scope,
                            )
                        )
                    except RelayError as e:  # busy: say why, retry on the next tick
                        view = Text(
                            f"relay watch: {e.code}: {e.message} (retrying)",
                            style="bold red" if out.color else "",
                        )
                    live.update(view, refresh=True)
                    last_draw = time.monotonic()
                if keys.wait(POLL_S) in ("q", "Q"):
                    return 0
    except KeyboardInterrupt:
        return 0


def _snapshots(env: Env) -> int:
    """A terminal that cannot redraw (TERM=dumb): a plain snapshot that fits the screen,
    printed again whenever something changes; `q` or Ctrl-C leaves."""
    out = env.out
    try:
        with _keyboard(env.ctx.stdin) as keys:
            last_version: int | str | None = None  # the database's data_version
            rung: set[tuple[object, ...]] | None = None
            while True:
                try:
                    version: int | str = env.store.data_version()
                except RelayError:  # no home there yet (design.md §2): said once below,
                    version = "no home"  # and watch keeps looking until one is made
                if version != last_version:
                    try:
                        snap = _snapshot(env)
                        last_version = version
                        rung = _ring(out.stdout, snap, rung)
                        width, height = terminal_size(out.stdout, out.environ)
                        lines = watch_lib.render(
                            snap,
                            width,
                            height - 1,
                            ellipsis=out.ellipsis,
                            scope=env.out.scope,
                            footer=f"{watch_lib.clock_time(snap.now)}  q or Ctrl-C: leave; "
                            "a new snapshot prints when something changes",
                        )
                    except RelayError as e:
                        lines = [f"relay watch: {e.code}: {e.message} (retrying)"]
                        if version == "no home":
                            last_version = version
                    out.line("")
                    for ln in lines:
                        out.line(str(ln))
                    out.stdout.flush()
                if keys.wait(POLL_S) in ("q", "Q"):
                    return 0
    except KeyboardInterrupt:
        return 0


def _ring(
    stream: TextIO, snap: Snapshot, rung: set[tuple[object, ...]] | None
) -> set[tuple[object, ...]]:
    """The terminal bell, once for each "needs you" item that was not on the screen before
    (design.md §19; none for those there when watch started). Returns the items rung for."""
    now: set[tuple[object, ...]] = {
        (s.session_id, s.activity.activity, s.activity.cause, s.activity.since) for s in snap.needs
    }
    if rung is None:
        return now
    new = now - rung
    if new:
        try:
            stream.write("\a" * len(new))
            stream.flush()
        except (OSError, ValueError):
            pass
    return rung | now


def _interrupt(signum: int, frame: FrameType | None) -> NoReturn:
    """SIGTERM/SIGHUP leave like Ctrl-C, so the screen and the terminal mode are restored."""
    raise KeyboardInterrupt


class _Keys:
    """Single key presses from a terminal in cbreak mode; the terminal is restored on stop."""

    def __init__(self, stream: TextIO | None) -> None:
        self.fd: int | None = None
        self.saved: list[Any] | None = None  # the terminal's attributes, as termios gives them
        try:
            if stream is not None and stream.isatty():  # (None: stdin is closed)
                self.fd = stream.fileno()
        except (AttributeError, ValueError, OSError):
            self.fd = None

    def start(self) -> None:
        if self.fd is None:
            return
        import termios
        import tty

        try:
            self.saved = termios.tcgetattr(self.fd)
            tty.setcbreak(self.fd)
        except termios.error:
            self.fd = None

    def wait(self, timeout: float) -> str | None:
        """The key pressed within ``timeout`` seconds, else None (sleeps when no terminal)."""
        if self.fd is None:
            time.sleep(timeout)
            return None
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return None
        data = os.read(self.fd, 64)
        if not data:  # the terminal went away: keep showing, stop reading
            self.fd = None
            return None
        return data.decode("utf-8", "replace")[:1]

    def stop(self) -> None:
        if self.fd is not None and self.saved is not None:
            import termios

            try:
                termios.tcsetattr(self.fd, termios.TCSADRAIN, self.saved)
            except termios.error:
                pass
