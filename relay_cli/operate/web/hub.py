"""The web view's one reader of the database (design.md §17).

A ``Hub`` owns the store's connection. While at least one page listens, its thread waits
for the database to change exactly as `relay wait` does (``due.poll``: SQLite's
``data_version`` looked at every ``poll_interval``, PostgreSQL's ``LISTEN``/``NOTIFY``
with its slow safety poll), reads watch's snapshot when something changed or a deadline
passed, and publishes the page's document when it differs from the last one. It holds no
transaction and no lock while it waits; with no page listening it does not look at all.
When ``poll`` wakes it without a write having committed (PostgreSQL's safety poll) and
no deadline passed, the store's ``write_mark`` says so in one statement and the snapshot
is not read again (at least every ``REFRESH_S`` it is: a peer's wakeup moves with time).

The connection serves one thread at a time (``_db``): the hub's thread holds it except
while it sleeps, and a request for a page's fresh snapshot or a request's text takes it
in between. ``stop`` ends the hub's thread and then takes the connection one last time:
once it returns, no thread is using the store or will use it again (a request that asks
afterwards is refused without touching it), so the caller may close the store. Closing a
SQLite connection while another thread runs a statement on it crashes the process.
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ...core import clock
from ...core.command import NO_SCOPE, Scope
from ...core.errors import RelayError
from ...requests import lifecycle, objects, validate
from ...requests.due import next_due, poll, unit
from .. import watch
from .page import RECENT_FINAL_S, page_doc, text_doc

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ...core.output import JsonObject
    from ...store import Store

# how long one poll runs before the loop looks at its listeners again (it ends sooner
# when the last page leaves or the view stops)
POLL_SPAN_S = 3600.0
RETRY_S = 1.0  # after an error, look again this much later
REFRESH_S = 60.0  # read the snapshot at least this often, written to or not


class _Idle(Exception):
    """Raised out of ``poll`` when nobody listens any more or the view stops."""


class Stopped(Exception):
    """The view stopped: the store is not used any more (it may be closed already)."""


class Hub:
    def __init__(self, store: Store, scope: Scope = NO_SCOPE) -> None:
        self.store = store
        self.scope = scope  # the flags every command shown carries (design.md §14)
        # the database shown: the home, or the URL without its password
        self.where = where(store)
        self._db = threading.Lock()  # the store's connection, one thread at a time
        self._changed = threading.Condition()  # guards the five below
        self.version = 0  # counts the documents that differed from the one before
        self.body = b"{}"  # the newest document, as JSON
        self._last: JsonObject | None = None  # the newest one without its time
        self.listeners = 0
        self.stopped = False
        # what the last snapshot read saw (guarded by _db): the store's write mark before
        # it, the next deadline, when (monotonic)
        self._mark: int | None = None
        self._due: int | None = None
        self._read_at = 0.0
        self._closed = False  # (guarded by _db) set by stop: nothing uses the store again
        self._thread = threading.Thread(target=self._run, name="relay-web-hub", daemon=True)

    # ------------------------------------------------------------- for the server
    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop the hub's thread and wait for it, and for any request that is reading the
        database, to be done with the store: after this, nothing here touches it."""
        with self._changed:
            self.stopped = True
            self._changed.notify_all()
        if self._thread.is_alive():
            # (it ends within a poll interval: it looks at ``stopped`` after every sleep;
            # a statement it runs meanwhile ends by the store's own deadline)
            self._thread.join()
        with self._db:  # whoever holds the connection is done with it
            self._closed = True

    @contextmanager
    def _connection(self) -> Iterator[None]:
        """Hold the store's connection; refused (``Stopped``) once the hub has stopped."""
        with self._db:
            if self._closed:
                raise Stopped
            yield

    @contextmanager
    def listening(self) -> Iterator[None]:
        """A page listens for new documents while inside: the hub watches the database."""
        with self._changed:
            self.listeners += 1
            self._changed.notify_all()
        try:
            yield
        finally:
            with self._changed:
                self.listeners -= 1

    def snapshot(self) -> tuple[int, bytes]:
        """Read the database now; the document (its version and JSON). A RelayError
        (the database busy or gone) is published as the document and raised; ``Stopped``
        once the view stops."""
        with self._connection():
            try:
                doc = self._read()
            except RelayError as e:
                self._publish_error(e)
                raise
        return self._publish(doc)

    def next(self, after: int, timeout: float) -> tuple[int, bytes] | None:
        """The first document newer than version ``after``, waiting up to ``timeout``
        seconds for one; None when none came or the view stops."""
        with self._changed:
            self._changed.wait_for(lambda: self.version > after or self.stopped, timeout)
            if self.stopped or self.version <= after:
                return None
            return self.version, self.body

    def text(self, request_id: str) -> JsonObject:
        """A request's text and reply, for the page that asked (design.md §17): by its
        full id, as the page names it; ``Stopped`` once the view stops."""
        request_id = validate.validate_id(request_id)
        with self._connection(), unit(self.store, write=False):
            row = lifecycle.get(self.store, request_id)
            return text_doc(objects.request_object(row, text=True, reply=True))

    # ------------------------------------------------------------- the thread
    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self.stopped or self.listeners > 0)
                if self.stopped:
                    return
            try:
                with self._connection():
                    poll(self.store, self._check, POLL_SPAN_S, sleep=self._pause)
            except _Idle:
                continue
            except Stopped:
                return
            except RelayError:  # published by _check
                pass
            except Exception as e:  # noqa: BLE001 - relay's own bug: said on the page
                self._publish_error(RelayError("internal_error", f"{type(e).__name__}: {e}"))
            else:
                continue
            with self._changed:  # look again a little later
                self._changed.wait_for(lambda: self.stopped, RETRY_S)

    def _check(self) -> None:
        """Called by ``poll`` (holding the connection) when the database changed or a
        deadline passed: publish what it holds now."""
        self._still_wanted()
        try:
            if self._unchanged():
                return None
            doc = self._read()
        except RelayError as e:
            self._publish_error(e)
            raise  # (poll looks again when the server is gone, design.md §13)
        self._publish(doc)
        return None  # (poll goes on waiting: only _Idle ends it)

    def _pause(self, seconds: float) -> None:
        """poll's sleep: the connection is free for others meanwhile."""
        self._db.release()
        try:
            self.store.pause(seconds)
        finally:
            self._db.acquire()
        self._still_wanted()

    def _still_wanted(self) -> None:
        if self.stopped or self.listeners == 0:
            raise _Idle

    def _unchanged(self) -> bool:
        """Nothing was written since the last read, no deadline has passed since, and it
        is recent: what the page shows is still the truth."""
        return (
            self.store.write_mark() == self._mark
            and (self._due is None or self._due > self.store.clock.now_ms())
            and time.monotonic() - self._read_at < REFRESH_S
        )

    def _read(self) -> JsonObject:
        mark = self.store.write_mark()  # (before: a write while reading moves it again)
        with unit(self.store, write=False) as now:
            snap = watch.gather(self.store, now, final_within_s=RECENT_FINAL_S)
            due = next_due(self.store)
        self._mark, self._due, self._read_at = mark, due, time.monotonic()
        return page_doc(snap, self.where, self.scope)

    def _publish(self, doc: JsonObject) -> tuple[int, bytes]:
        """Keep ``doc`` as the newest; a new version when more than its time changed."""
        same = {k: v for k, v in doc.items() if k != "at"}
        with self._changed:
            self.body = json.dumps(doc, separators=(",", ":")).encode("ascii")
            if same != self._last:
                self._last = same
                self.version += 1
                self._changed.notify_all()
            return self.version, self.body

    def _publish_error(self, e: RelayError) -> None:
        # (the time by this machine's clock: the server's may be out of reach)
        doc = {
            "at": clock.iso(int(time.time() * 1000)),
            "error": {"code": e.code, "message": e.message},
        }
        with self._changed:
            self.body = json.dumps(doc, separators=(",", ":")).encode("ascii")
            self._last = None
            self.version += 1
            self._changed.notify_all()


def where(store: Store) -> str:
    """What the view names as the database it shows: the home's path, or on PostgreSQL the
    URL relay prints (design.md §13), and when it prints none, no URL at all."""
    if store.shared_url(with_password=True) is None:
        return str(store.home)
    return store.shared_url() or "a PostgreSQL database (relay does not print its URL)"
