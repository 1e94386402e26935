"""`relay web`'s HTTP server (design.md §17): Python's own ``http.server``, on 127.0.0.1.

Every request must carry this run's token (``?token=``) and a ``Host`` that names the
loopback address, or it is refused with 403 before anything else is looked at: another
user of the machine cannot read the page without the token, and a web page elsewhere
cannot reach it through a DNS name that points at 127.0.0.1 (DNS rebinding). Only GET is
answered; nothing the server does writes to the database beyond what every read does
(due time-based transitions, design.md §5).

Every response carries a strict Content-Security-Policy (scripts and styles from this
server only, no inline code, no frames, no forms, Trusted Types so the page's script can
never write markup) and is never cached. No request line is logged: a URL holds the
token, and nothing here writes a request's text anywhere but into the answer that asked
for it.

The page itself (``static/``: plain HTML, CSS and a small script, no build step) is
package data, read when the view starts.
"""

from __future__ import annotations

import errno
import hmac
import secrets
import selectors
import signal
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import parse_qs, urlsplit

from ...core.errors import RelayError
from .hub import Hub, Stopped

if TYPE_CHECKING:
    from ...core.command import Scope
    from ...store import Store

ADDRESS = "127.0.0.1"
# The Host names a browser may send for it: the address itself, or through an SSH tunnel
# on the viewer's machine (`ssh -L 8080:127.0.0.1:PORT`) its loopback, with any port.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
KEEPALIVE_S = 15.0  # an event stream says something this often, so a dead one is noticed
RECONNECT_MS = 1000  # how soon a browser reconnects a broken event stream
END_S = 5.0  # how long the view waits, as it stops, for its connections' threads to end
TOKEN_PLACE = "__RELAY_TOKEN__"  # where index.html takes the token (its asset URLs)
HEADERS = {
    "Content-Security-Policy": "; ".join(
        [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "connect-src 'self'",
            "img-src 'self'",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
            "require-trusted-types-for 'script'",
            "trusted-types 'none'",
        ]
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
STATIC = {  # path -> (file in static/, content type)
    "/": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/app.css": ("app.css", "text/css; charset=utf-8"),
    "/icon.svg": ("icon.svg", "image/svg+xml"),
}


def page_files() -> dict[str, bytes]:
    """The page's files as shipped with relay (package data)."""
    folder = resources.files(__package__) / "static"
    return {name: (folder / name).read_bytes() for name, _ in STATIC.values()}


class WebServer(ThreadingHTTPServer):
    """One thread per connection, each known to the server (``_open``) so that ``stop``
    can end them all and wait for them before the store is closed and the interpreter
    exits (a thread still reading the database then would crash the process)."""

    hub: Hub
    token: str
    files: dict[str, bytes]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # each connection's thread and its socket: added by the main thread before the
        # thread starts (without the lock, which a signal's KeyboardInterrupt there could
        # leave taken); the thread removes itself, holding the lock, before it closes
        # its socket, so stop never shuts down a socket that was closed
        self._open: dict[threading.Thread, socket.socket] = {}
        self._lock = threading.Lock()

    def serve_until_signal(self) -> None:
        """Answer connections until a signal's handler raises (the view's handlers raise
        KeyboardInterrupt). Not ``serve_forever``: its wait would not end for a signal
        that came while this thread ran Python code just before it (the handler runs
        only once the wait returns, after its interval). Here every signal that has a
        Python handler writes to a socket this wait watches (``signal.set_wakeup_fd``),
        so the wait ends and the handler runs, whenever the signal came."""
        wake, waker = socket.socketpair()
        wake.setblocking(False)
        waker.setblocking(False)
        self.socket.setblocking(False)  # (a connection gone before accept() is no wait)
        before = signal.set_wakeup_fd(waker.fileno(), warn_on_full_buffer=False)
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(self, selectors.EVENT_READ)
                selector.register(wake, selectors.EVENT_READ)
                while True:
                    for key, _ in selector.select():
                        if key.fileobj is wake:
                            try:
                                wake.recv(64)  # (the handler runs now, in this thread)
                            except OSError:
                                pass
                        else:
                            self._accept()
        finally:
            signal.set_wakeup_fd(before)
            wake.close()
            waker.close()

    def _accept(self) -> None:
        """Give the connection that waits a thread of its own (serve_forever's step)."""
        try:
            request, client_address = self.get_request()
        except OSError:  # (it went away before it was accepted)
            return
        try:
            self.process_request(request, client_address)
        except Exception:  # noqa: BLE001 - no thread for it: that connection is closed
            self.shutdown_request(request)
        except BaseException:
            self.shutdown_request(request)
            raise

    def process_request(self, request: Any, client_address: Any) -> None:
        # (a daemon: one that outlived stop's wait would not keep the process alive)
        thread = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name="relay-web-request",
            daemon=True,
        )
        self._open[thread] = request
        thread.start()

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:  # noqa: BLE001 - (as socketserver's own)
            self.handle_error(request, client_address)
        finally:
            with self._lock:  # (before its socket is closed: stop never touches it after)
                self._open.pop(threading.current_thread(), None)
            self.shutdown_request(request)

    def stop(self) -> None:
        """End everything the view started, in this order: the hub (after which nothing
        uses the store), every connection (its socket shut down, which ends a read or
        write it waits in; a page's event stream ends with the hub) and its thread,
        waited for; then the listening socket is closed."""
        self.hub.stop()
        with self._lock:
            threads = list(self._open.items())
            for _, conn in threads:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # the page had gone already
        deadline = time.monotonic() + END_S
        for thread, _ in threads:
            if thread.is_alive():  # (not one that never started)
                thread.join(max(0.0, deadline - time.monotonic()))
        self.server_close()

    def handle_error(self, request: object, client_address: object) -> None:
        """A connection that broke is the browser's business: nothing is printed (the
        handler answers relay's own errors itself)."""


def make_server(hub: Hub, port: int) -> WebServer:
    """A server bound to 127.0.0.1:``port`` (0: a free port) with a new token."""
    try:
        server = WebServer((ADDRESS, port), Handler, bind_and_activate=True)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            why = "something else listens there"
        elif e.errno == errno.EACCES:
            why = "this user may not listen on it"
        else:
            why = e.strerror or str(e)
        raise RelayError(
            "usage_error",
            f"cannot serve on {ADDRESS}:{port}: {why}; give another --port, or none for a free one",
        ) from e
    server.hub = hub
    server.token = secrets.token_urlsafe(32)
    server.files = page_files()
    return server


def serve(store: Store, scope: Scope, port: int, ready: Callable[[str], None]) -> None:
    """Serve the view of ``store`` until interrupted (KeyboardInterrupt from a signal's
    handler, or any exception raised in this thread, the main one); ``ready(url)`` is
    called once it listens. Everything it started (the hub's thread, each connection's,
    the sockets) is stopped, waited for and closed however it ends: when it returns,
    nothing uses ``store`` any more, and it may be closed."""
    hub = Hub(store, scope)
    server = make_server(hub, port)
    try:
        hub.start()
        ready(f"http://{ADDRESS}:{server.server_port}/?token={server.token}")
        server.serve_until_signal()
    finally:
        server.stop()


def host_is_loopback(host: str | None) -> bool:
    """Does a ``Host`` header name the loopback address (``127.0.0.1:8765``, ``localhost``,
    ``[::1]:8080``)? Anything else, a name that merely resolves there included, does not."""
    if not host:
        return False
    if host.startswith("["):  # an IPv6 literal, with or without a port
        name, bracket, rest = host.partition("]")
        name += bracket
        port = rest[1:] if rest.startswith(":") else None
        if rest and port is None:
            return False
    else:
        name, colon, port_or_empty = host.partition(":")
        port = port_or_empty if colon else None
    if port is not None and not (port.isascii() and port.isdigit() and len(port) <= 5):
        return False
    return name.lower() in LOOPBACK_HOSTS


class Handler(BaseHTTPRequestHandler):
    server: WebServer
    server_version = "relay"
    timeout = 30  # a connection that sends no whole request in this time is closed
    error_content_type = "text/plain; charset=utf-8"
    error_message_format = "%(code)d %(message)s\n"

    # ------------------------------------------------------------- the gate
    def _allowed(self, query: str) -> bool:
        if not host_is_loopback(self.headers.get("Host")):
            return False
        tokens = parse_qs(query, keep_blank_values=True).get("token", [])
        return len(tokens) == 1 and hmac.compare_digest(
            tokens[0].encode("utf-8", "replace"), self.server.token.encode()
        )

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        try:
            self._get()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the page went away
        except Stopped:  # the view is stopping (its socket is shut down, or soon will be)
            try:
                self._send(503, b"503 relay web is stopping\n")
            except OSError:
                pass
        except Exception as e:  # noqa: BLE001 - relay's own bug: said, never a traceback
            self._send(500, f"500 internal_error: {type(e).__name__}\n".encode())

    def _get(self) -> None:
        url = urlsplit(self.path)
        if not self._allowed(url.query):
            self._send(403, b"403 refused: this view needs the address relay web printed\n")
            return
        if url.path in STATIC:
            name, kind = STATIC[url.path]
            body = self.server.files[name]
            if name == "index.html":
                body = body.replace(TOKEN_PLACE.encode(), self.server.token.encode())
            self._send(200, body, kind)
        elif url.path == "/snapshot":
            try:
                _, body = self.server.hub.snapshot()
            except RelayError:
                self._send(503, self.server.hub.body, "application/json")
                return
            self._send(200, body, "application/json")
        elif url.path == "/events":
            self._events()
        elif url.path == "/text":
            self._text(parse_qs(url.query).get("id", [""])[0])
        else:
            self._send(404, b"404 not found\n")

    def _other(self) -> None:
        self._send(405, b"405 this view only reads\n", extra={"Allow": "GET"})

    do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_HEAD = _other  # noqa: N815

    def _text(self, ref: str) -> None:
        import json

        try:
            doc = self.server.hub.text(ref)
        except RelayError as e:
            status = 404 if e.code in ("request_not_found", "invalid_id", "ambiguous_id") else 503
            doc = {"error": {"code": e.code, "message": e.message}}
            self._send(status, json.dumps(doc).encode("ascii"), "application/json")
            return
        self._send(200, json.dumps(doc).encode("ascii"), "application/json")

    # ------------------------------------------------------------- the event stream
    def _events(self) -> None:
        """Server-sent events: the document now, then each new one as the database changes."""
        hub = self.server.hub
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.end_headers()
        try:
            self.wfile.write(f"retry: {RECONNECT_MS}\n\n".encode())
            with hub.listening():
                try:
                    version, body = hub.snapshot()
                except RelayError:  # said in the document; the hub looks again
                    version, body = hub.version, hub.body
                self._event(body)
                while not hub.stopped:
                    got = hub.next(version, KEEPALIVE_S)
                    if got is None:
                        self.wfile.write(b": still here\n\n")
                    else:
                        version, body = got
                        self._event(body)
        except (BrokenPipeError, ConnectionResetError, socket.timeout, OSError):
            return  # the page went away
        except Stopped:
            return  # the view is stopping

    def _event(self, body: bytes) -> None:
        self.wfile.write(b"data: " + body + b"\n\n")

    # ------------------------------------------------------------- answers
    def _send(
        self,
        status: int,
        body: bytes,
        kind: str = "text/plain; charset=utf-8",
        extra: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def end_headers(self) -> None:
        for name, value in HEADERS.items():
            self.send_header(name, value)
        super().end_headers()

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (its name)
        """Nothing is logged: a request line carries the token."""
