"""`relay watch`: the live full-screen view for the person running the agents."""

from __future__ import annotations

import os
import select
import signal
import sys
import time

from ..errors import RelayError
from .app import Env, HomeOpt, JsonOpt, app, examples, lazy_module

watch_lib = lazy_module("relay_cli.watch")

TICK_S = 0.5  # redraw at least this often (ages and leases move)
POLL_S = 0.1  # how often the database's data_version and the keyboard are checked


def _snapshot(env: Env) -> watch_lib.Snapshot:
    with env.unit(write=False) as now:
        return watch_lib.gather(env.store, now)


@app.command(epilog=examples(
    'relay watch',
    'relay watch > snapshot.txt   # not a terminal: one snapshot',
))
def watch(json_: JsonOpt = False, home: HomeOpt = None) -> int:
    """Live view for a person: open requests, peers, recent transitions.

    Refreshes within a second of any change, writes nothing (apart from time-based
    transitions that were already due), and leaves on `q` or Ctrl-C. When stdout is not a
    terminal it prints one plain snapshot (with --json: one JSON document) and exits.
    """
    env = Env(json_, home)
    try:
        if env.json:
            env.out.json(watch_lib.json_doc(_snapshot(env)))
            return 0
        if not _isatty(sys.stdout):
            env.out.stdout.write(watch_lib.render_plain(_snapshot(env)))
            env.out.stdout.flush()
            return 0
        return _live(env)
    finally:
        env.close()


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _live(env: Env) -> int:
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    no_color = bool(os.environ.get("NO_COLOR"))  # design.md §7: no colour, no box characters
    console = Console(file=sys.stdout, highlight=False, emoji=False, no_color=no_color)
    keys = _Keys(sys.stdin)
    saved = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        keys.start()
        with Live(console=console, screen=True, auto_refresh=False,
                  redirect_stdout=False, redirect_stderr=False) as live:
            last_version, last_draw = None, 0.0
            while True:
                version = env.store.data_version()
                if version != last_version or time.monotonic() - last_draw >= TICK_S:
                    try:
                        snap = _snapshot(env)
                        last_version = version
                        view = watch_lib.render_rich(snap, lines=not no_color)
                    except RelayError as e:  # busy: say why, retry on the next tick
                        view = Text(f"relay watch: {e.code}: {e.message} (retrying)",
                                    style="bold red")
                    live.update(view, refresh=True)
                    last_draw = time.monotonic()
                if keys.wait(POLL_S) in ("q", "Q"):
                    return 0
    except KeyboardInterrupt:
        return 0
    finally:
        keys.stop()
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def _interrupt(signum, frame) -> None:
    """SIGTERM/SIGHUP leave like Ctrl-C, so the screen and the terminal mode are restored."""
    raise KeyboardInterrupt


class _Keys:
    """Single key presses from a terminal in cbreak mode; the terminal is restored on stop."""

    def __init__(self, stream) -> None:
        self.fd = None
        self.saved = None
        try:
            if stream.isatty():
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
