"""The SQLite database's checks (design.md §11): opened read-only, its schema, integrity,
pragmas, size and tables; then what is in it (``contents``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ...core.errors import RelayError
from ...core.output import size
from .contents import check_contents
from .files import NO_DB_YET
from .judge import UPGRADE, failed, guarded
from .report import FAIL, OK, Report

if TYPE_CHECKING:
    from ...store import Health

SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def check_database(home: Path, report: Report, now: int) -> None:
    from ...store import LATEST_SCHEMA, open_store_readonly

    try:
        store = open_store_readonly(
            home, None, report.checked.clock, environ=report.checked.environ
        )
    except RelayError as e:
        failed(report, "database", e)
        return
    if store is None:
        report.add("database", OK, NO_DB_YET)
        return
    try:
        try:
            health = store.health()
        except RelayError as e:
            failed(report, "database", e)
            return
        errors = health.errors
        report.add("database", OK, f"{health.where}: a SQLite database, opened read-only")
        report.facts["schema_version"] = health.schema_version
        usable = judge_schema(report, health, LATEST_SCHEMA, "a SQLite database")
        if "quick_check" in errors:
            failed(report, "quick_check", errors["quick_check"])
        elif health.integrity is not None:  # (read, as it did not fail)
            _check_integrity(health.integrity, report)
        _check_pragmas(health, report)
        if health.file_bytes is not None:  # (a SQLite store's health always has it)
            _check_size(health.file_bytes, report)
        check_tables(health, report)
        if usable:
            guarded(report, "requests", lambda: check_contents(store, report, now))
    finally:
        store.close()


def judge_schema(report: Report, health: Health, latest: int, what: str) -> bool:
    """The schema check from ``health``; True when relay's tables may be read."""
    if "schema" in health.errors:
        err = health.errors["schema"]
        failed(report, "schema", err, f"cannot read the schema ({err.message})")
        return False
    return _check_schema(report, health.schema_version, health.has_tables, latest, what)


def _check_schema(
    report: Report, version: int, has_tables: bool, latest: int, what: str = "a SQLite database"
) -> bool:
    if version > latest:
        report.add(
            "schema",
            FAIL,
            f"schema_too_new: schema version {version}, this relay "
            f"understands up to {latest}; upgrade relay, do not downgrade the database",
            fix=UPGRADE,
        )
        return False
    if version == 0:
        if has_tables:
            failed(
                report,
                "schema",
                RelayError(
                    "database_corrupt",
                    f"{what}, but not relay's (schema 0 with tables named like relay's)",
                ),
            )
        else:
            report.add(
                "schema",
                OK,
                f"empty database (schema 0); the next relay command that "
                f"writes creates schema {latest}",
            )
        return False
    if version < latest:
        report.add(
            "schema",
            OK,
            f"schema version {version}, newest supported {latest}: the "
            "next relay command that writes migrates it",
        )
        return True
    report.add("schema", OK, f"schema version {version} (newest supported {latest})")
    return True


def _check_integrity(result: tuple[str, ...], report: Report) -> None:
    if result == ("ok",):
        report.facts["quick_check"] = "ok"
        report.add("quick_check", OK, "ok")
    else:
        shown = "; ".join(result[:3]) + (f" (+{len(result) - 3} more)" if len(result) > 3 else "")
        report.facts["quick_check"] = "failed"
        failed(report, "quick_check", RelayError("database_corrupt", shown))


def _check_pragmas(health: Health, report: Report) -> None:
    mode = health.journal_mode
    if mode is not None:
        report.facts["journal_mode"] = mode
        if mode == "wal":
            report.add("journal_mode", OK, "wal")
        else:
            report.add(
                "journal_mode", OK, f"{mode}; relay switches it to wal on its next writing command"
            )
    sync = health.synchronous
    if sync is not None:
        report.facts["synchronous"] = "FULL"
        report.add(
            "synchronous",
            OK,
            "FULL: relay sets it on every connection it opens "
            f"(SQLite's default for a new connection here: {SYNCHRONOUS.get(sync, sync)})",
        )
    if "journal_mode" in health.errors:
        failed(report, "journal_mode", health.errors["journal_mode"])


def _check_size(sizes: dict[str, int], report: Report) -> None:
    total = sizes["relay.db"] + sizes["WAL"]
    report.facts["db_bytes"] = total
    report.add(
        "db_size",
        OK,
        f"{size(total)} (relay.db {size(sizes['relay.db'])}, WAL {size(sizes['WAL'])})",
    )


def check_tables(health: Health, report: Report) -> None:
    if "tables" in health.errors:
        failed(report, "tables", health.errors["tables"])
        return
    counts = health.rows_by_table
    if counts is None:  # (read whenever it did not fail: Health leaves out only a failed fact)
        return
    report.facts["rows_by_table"] = counts
    report.add("tables", OK, ", ".join(f"{name} {n}" for name, n in counts.items()) or "none")
