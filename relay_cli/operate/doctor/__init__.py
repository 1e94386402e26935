"""`relay doctor`: a health report of the state directory and database (design.md §11).

Doctor creates nothing and writes nothing to the database: it opens relay.db read-only
(as an immutable file when no -wal/-shm exist, so SQLite creates none), applies no due transitions and renews no lease. It keeps going when
the directory is unsafe, the database is corrupt or its schema is newer than this relay:
each problem becomes a failed check. ``fix=True`` only tightens modes that are too open
(directory 0700, files 0600) on paths that are not symlinks and belong to the caller.

doctor is one folder (design.md §16): ``report`` (a check, the report, its areas and
their summaries), the checks by area (``settings``, ``files``, ``database``,
``postgres``, ``contents``, ``peers``, ``runtimes``), ``judge`` (what a problem needs:
its failed check and the one command that settles it), and ``screen`` (the report as
printed). This module runs the checks in order (``diagnose``).
"""

from __future__ import annotations

import platform
import sqlite3
from pathlib import Path

from ... import __version__
from ...core.context import Context
from .report import FAIL, GROUPS, OK, WARN, Check, Checked, Report, group_of

__all__ = ["FAIL", "GROUPS", "OK", "WARN", "Check", "Checked", "Report", "diagnose", "group_of"]


def diagnose(home: Path, context: Context, fix: bool = False) -> Report:
    """The report on ``home`` or the database of the call's ``context`` (its URL, clock,
    environment and limits)."""
    from ...store import LATEST_SCHEMA, database_url
    from .database import check_database
    from .files import check_paths, fix_modes
    from .postgres import check_postgres
    from .runtimes import check_codex_dirs
    from .settings import check_clock, check_queue_cap

    url = database_url(context.database_url)
    report = Report(home, Checked(home, url, context.clock, context.environ, context.limits))
    report.facts["schema_supported"] = LATEST_SCHEMA
    report.facts["backend"] = "postgresql" if url else "sqlite"
    report.add("relay_version", OK, f"relay {__version__}")
    report.add("python", OK, f"Python {platform.python_version()}")
    if url is None:
        report.add("sqlite", OK, f"SQLite {sqlite3.sqlite_version}")
    now = check_clock(report)
    check_queue_cap(report)
    check_codex_dirs(report)
    if url is not None:
        check_postgres(home, url, report)
    else:
        if fix:
            fix_modes(home, report)
        if check_paths(home, report):
            check_database(home, report, now)
    return report
