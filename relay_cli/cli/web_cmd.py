"""`relay web`: the view in the browser (design.md §17), served in the foreground."""

from __future__ import annotations

import signal
import sys
from typing import TYPE_CHECKING, Annotated, NoReturn, Optional

import typer

from .app import Env, HomeOpt, WholeNumber, app, examples

if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import FrameType


@app.command(
    epilog=examples(
        "relay web                        # prints its address, opens the browser",
        "relay web --port 8765 --no-open  # on a machine you reach by SSH; then",
        "ssh -L 8765:127.0.0.1:8765 HOST  # on yours, and open the address there",
    )
)
def web(
    port: Annotated[
        Optional[int],
        typer.Option(
            "--port",
            metavar="N",
            click_type=WholeNumber("--port", 1, 65535),
            show_default=False,
            help="Listen on this port of 127.0.0.1 (default: a free one).",
        ),
    ] = None,
    no_open: Annotated[
        bool, typer.Option("--no-open", help="Do not open a browser; only print the address.")
    ] = False,
    json_: Annotated[
        bool,
        typer.Option(
            "--json",
            help='Print the address as one JSON document, {"url": ...}; no notes on stderr.',
        ),
    ] = False,
    home: HomeOpt = None,
) -> int:
    """A live, read-only page in the browser: what needs a person first.

    Serves on 127.0.0.1 only, in the foreground until Ctrl-C. The first line of output is
    its address, with a token made for this run: without it every request is refused. The
    page shows what `relay watch` shows, live (within a second of a change), changes
    nothing, and names the command to run where a person should act. It opens the browser
    unless --no-open or there is no display.
    """
    env = Env(json_, home, creates=False)
    saved = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    for sig in STOP_SIGNALS:
        # (Ctrl-C as Python left it: ignored when relay's caller ignored it, as a shell
        # script does for a command it runs in the background)
        if sig != signal.SIGINT or saved[sig] is not signal.SIG_IGN:
            signal.signal(sig, _interrupt)
    opened: list[str] = []
    try:
        store = env.store  # a missing home is refused before anything listens

        def ready(url: str) -> None:
            if env.json:
                env.out.json({"url": url})
            else:
                env.out.line(url)
            env.out.stdout.flush()
            env.out.note(f"relay web: serving {where(store)}; Ctrl-C stops it")
            if not no_open and _display(env.ctx.environ):
                opened.append(_open_browser(url))

        from ..operate.web.hub import where
        from ..operate.web.server import serve  # (only this command loads the view)

        serve(store, env.out.scope, port or 0, ready)
    except KeyboardInterrupt:
        return 0
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        for folder in opened:
            _forget(folder)
        env.close()
    return 0


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _interrupt(signum: int, frame: FrameType | None) -> NoReturn:
    """Ctrl-C, SIGTERM and SIGHUP end the view, the first of them: another one while it
    stops (it waits for its threads to be done with the database) is ignored, so it
    never cuts that short and closes the database under a thread still reading it."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt


def _display(environ: Mapping[str, str]) -> bool:
    """Is there a screen a browser could open on? (Without one, Python's webbrowser would
    start a text browser in this terminal.)"""
    if sys.platform == "darwin":
        return True
    return bool(environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY"))


def _open_browser(url: str) -> str:
    """Open ``url`` in the person's browser through a file only they can read, so the
    token is never on a command line (another user's `ps` shows those). Returns the
    folder that holds the file, removed when the view ends."""
    import html
    import os
    import tempfile
    import threading
    import webbrowser

    folder = tempfile.mkdtemp(prefix="relay-web-")  # (mode 0700)
    path = os.path.join(folder, "open.html")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(
            '<!doctype html><meta charset="utf-8">'
            f'<meta http-equiv="refresh" content="0; url={html.escape(url)}">'
            f'<a href="{html.escape(url)}">relay web</a>\n'
        )

    def launch() -> None:
        try:
            webbrowser.open("file://" + path, new=2)
        except Exception:  # noqa: BLE001 - no browser: the printed address is there to open
            pass

    # (in a thread of its own: a browser that runs in the foreground would hold the view)
    threading.Thread(target=launch, name="relay-web-browser", daemon=True).start()
    return folder


def _forget(folder: str) -> None:
    import shutil

    shutil.rmtree(folder, ignore_errors=True)
