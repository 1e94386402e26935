"""What doctor makes of a problem (design.md §11): the failed check for an error code,
and the one command that settles it, runnable as printed: move a file aside (only one
as relay makes it, renamed, never deleted), upgrade relay, or point relay elsewhere
(never at a file or link that is not relay's to move)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ...core.command import DATABASE_URL, Command, Raw, shell
from ...core.errors import RelayError
from ...store.home import default_home
from .report import FAIL, Report

if TYPE_CHECKING:
    from collections.abc import Callable

AND = Raw("&&")  # (the shell runs the next move only when this one worked)
UPGRADE = shell("python", "-m", "pip", "install", "--upgrade", "relay-cli")
CORRUPT = (
    "stop every relay process, move the database aside (the next relay command starts "
    "an empty one) and restore a backup if you have one"
)
POINT_ELSEWHERE = (
    "relay leaves it alone; point relay at a directory of its own: unset RELAY_HOME "
    "(the per-user default) or pass --home DIR"
)


def failed(report: Report, name: str, err: RelayError, message: str | None = None) -> None:
    """A check that failed with ``err``, with the command for its code (design.md §11)."""
    from ...store import DB_NAME
    from ...store.home import COMPANIONS

    detail = f"{err.code}: {message or err.message}"
    fix: Command | None = None
    if err.code == "database_corrupt" and report.checked.url is None:
        names = [
            f"{DB_NAME}{s}"
            for s in ("", *COMPANIONS)
            if os.path.lexists(report.home / f"{DB_NAME}{s}")
        ]
        if relays_file(report.home, DB_NAME):
            detail, fix = f"{detail}; {CORRUPT}", aside_command(report.home, names or [DB_NAME])
        else:
            detail = (
                f"{detail}; {report.home / DB_NAME} does not look like a file relay made "
                "(a regular file of yours, mode 0600, in a directory of yours), so relay "
                "suggests no move; " + POINT_ELSEWHERE
            )
            fix = elsewhere(report, report.home)
    elif err.code == "database_corrupt":  # PostgreSQL: another program's tables there
        detail = (
            f"{detail}; give relay a database of its own (an empty one), or look at "
            "what is in this one"
        )
        fix = shell("psql", DATABASE_URL, "-c", "\\dt")
    elif err.code == "schema_too_new":
        detail, fix = f"{detail}; upgrade relay, never downgrade the database", UPGRADE
    elif err.code in ("busy", "database_unavailable"):
        detail, fix = f"{detail}; run doctor again in a moment", report.cmd("doctor")
    elif err.code == "unsafe_state_dir":
        fix = report.cmd("doctor --fix")
    report.add(name, FAIL, detail, fix=fix)


def guarded(report: Report, name: str, fn: Callable[[], object]) -> None:
    try:
        fn()
    except RelayError as err:  # the store types every failure of a statement (§7)
        failed(report, name, err)


def aside_command(home: Path, names: list[str]) -> Command:
    """The command that moves ``names`` in ``home`` aside (renamed, never deleted): one
    ``mv`` per name, joined by ``&&``."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    words: list[str] = []
    for n in names:
        words += [
            *(["&&", "mv"] if words else []),
            "--",
            str(home / n),
            f"{home / n}.aside-{stamp}",
        ]
    return shell("mv", *(AND if w == "&&" else w for w in words), changes=True)


def relays_file(home: Path, name: str) -> bool:
    """Is ``home/name`` a file as relay makes it (design.md §11): a regular file owned by
    you, open to nobody else, in a real directory owned by you and open to nobody else?
    Only such a file gets a command that moves it."""
    from ...store import inspect_path

    d, f = inspect_path(home), inspect_path(home / name)
    return (
        d.is_dir
        and not d.is_symlink
        and not d.foreign
        and not d.group_other_access
        and f.is_regular
        and not f.foreign
        and not f.group_other_access
    )


def symlink_fix(report: Report, home: Path) -> Command | None:
    """What to do about a home that is a symlink: relay never follows it, and --fix cannot
    change that. Check the directory it points to instead (if it is one), else point relay
    elsewhere: the link is not relay's to move (a dotfile manager's link, design.md §11)."""
    target = Path(os.path.realpath(home))
    if target.is_dir() and target != home:
        return report.cmd("doctor", home=target)
    return elsewhere(report, home)


def elsewhere(report: Report, home: Path) -> Command | None:
    """The command that points relay at another home: doctor on the per-user default, or
    None when the default is this very path (then only the explanation says how)."""
    default = default_home(report.checked.environ)
    return None if default == home else report.cmd("doctor", home=default)
