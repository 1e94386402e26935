"""A test-only pause at a named point of a command (design.md §10), so crash tests can kill
relay at its worst moment: `relay once` pauses at ``once-spawn``, between forking the
command's process and committing its pid (``python -m bench oncekill``).

Nothing happens unless two independent things agree: the environment variable and a
file in the state directory (:func:`pause_for_tests`).
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from relay_cli.store import Store

TEST_PAUSE_ENV = "RELAY_TEST_PAUSE"
TEST_PAUSE_FILE = "relay-test-pause"
TEST_PAUSE_MAX_S = 10.0


def pause_for_tests(store: Store, point: str, detail: str = "") -> None:
    """Stop for a moment at a named point, for crash tests only (design.md §10).

    Honoured only when two independent things agree: the environment variable
    ``RELAY_TEST_PAUSE`` is ``POINT=SECONDS`` *and* the state directory holds a regular
    file ``relay-test-pause``, owned by this user, whose whole content is that same text.
    A stray environment variable alone, or a stray file alone, does nothing. The pause
    is at most 10 s, holds no lock, and announces itself on stderr.
    """
    want = os.environ.get(TEST_PAUSE_ENV)
    home = getattr(store, "home", None)
    if not want or home is None:
        return
    name, _, seconds = want.partition("=")
    if name != point:
        return
    try:
        fd = os.open(os.path.join(home, TEST_PAUSE_FILE), os.O_RDONLY | os.O_NOFOLLOW
                     | os.O_NONBLOCK)
    except OSError:
        return
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return
        content = os.read(fd, 256).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    if content != want:
        return
    try:
        pause = min(max(float(seconds), 0.0), TEST_PAUSE_MAX_S)
    except ValueError:
        return
    with contextlib.suppress(OSError):
        os.write(2, f"relay: TEST PAUSE at {point}{detail} for {pause:g} s "
                    f"({TEST_PAUSE_ENV} and {TEST_PAUSE_FILE} are set)\n".encode())
    time.sleep(pause)
