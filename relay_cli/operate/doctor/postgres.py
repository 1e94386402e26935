"""The PostgreSQL server's checks instead of the home's (design.md §13): reachable, its
version, synchronous_commit, TLS, its clock; then the schema, tables and contents."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ...core.command import DATABASE_URL, Command, Raw, relay, shell
from ...core.errors import RelayError
from ...core.limits import CLOCK_WARN_MS
from .contents import check_contents
from .database import check_tables, judge_schema
from .judge import failed, guarded
from .report import FAIL, OK, WARN, Report

LOCAL_HOSTS = ("", "localhost", "127.0.0.1", "::1")
TLS_MODES = ("require", "verify-ca", "verify-full")


def check_postgres(home: Path, url: str, report: Report) -> None:
    """design.md §13: the server instead of the state directory and relay.db."""
    from ...store import LATEST_SCHEMA, open_pg_readonly
    from ...store.url import WRITE_IT, origin, read, shown

    reading, where = read(url), origin(url, report.checked.environ)
    report.facts["database_url"] = shown(url, where)
    if reading.url is not None:
        report.add("database_url", OK, f"{reading.url} (PostgreSQL; relay.db is not used)")
    else:  # design.md §13: never the URL as given, nor a piece of it
        said = f"the URL in {where}, which relay does not print: {reading.why}"
        if reading.refused:  # nothing connects with it, so there is nothing more to check
            report.add("database_url", FAIL, f"{said}; relay does not use it; {WRITE_IT}")
            return
        report.add("database_url", OK, f"{said} (PostgreSQL; relay.db is not used)")
    started = time.monotonic()
    try:
        store = open_pg_readonly(home, url, report.checked.clock, report.checked.environ)
    except RelayError as e:
        failed(report, "reachable", e)
        return
    try:
        connect_ms = (time.monotonic() - started) * 1000
        health = store.health()
        if health.server is None:  # not read: its error says why
            failed(report, "server", health.errors["server"])
        else:
            _check_server(health.server, report, connect_ms)
        report.facts["schema_version"] = health.schema_version
        usable = judge_schema(report, health, LATEST_SCHEMA, "a PostgreSQL database")
        try:
            now = store.clock.now_ms()  # the server's clock from here on
        except RelayError:  # a bad RELAY_TIME_OFFSET: reported above; the server's clock
            if health.server_now_ms is None:  # (a PostgreSQL store's health always has it)
                raise
            now = int(health.server_now_ms)
        check_tables(health, report)
        if usable:
            guarded(report, "requests", lambda: check_contents(store, report, now))
    finally:
        store.close()


def _with_sslmode(report: Report) -> Command:
    """`relay doctor` again with sslmode=verify-full set in the URL: the URL relay prints
    (design.md §13) when it connects as the one given, else read from $RELAY_DATABASE_URL
    (relay never prints a password)."""
    from ...store.url import password_elsewhere, printed_with, read

    url = report.checked.url or ""
    reading = read(url)
    if reading.url is not None and (
        not reading.secrets
        or (
            reading.secrets == ("password",) and password_elsewhere(reading, report.checked.environ)
        )
    ):
        word: str = printed_with(url, sslmode="verify-full") or ""
    else:
        sep = "&" if "?" in url else "?"  # (where the variable's URL has its query, if any)
        word = Raw(
            f'"${{RELAY_DATABASE_URL:?export the database URL first}}{sep}sslmode=verify-full"'
        )
    return relay("doctor", "--database-url", word, scoped=False)


def _loopback(host: str) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_server(f: dict[str, Any], report: Report, connect_ms: float) -> None:
    report.facts.update(
        server_version=f["server_version"],
        rtt_ms=round(f["rtt_ms"], 3),
        clock_offset_ms=round(f["clock_offset_ms"], 3),
        synchronous_commit=f["synchronous_commit"],
        tls=f["ssl_in_use"],
    )
    report.add(
        "reachable",
        OK,
        f"connected in {connect_ms:.0f} ms; a round-trip takes {f['rtt_ms']:.1f} ms",
    )
    report.add("server", OK, f"PostgreSQL {f['server_version']}")
    if f["synchronous_commit"] == "off":
        report.add(
            "synchronous_commit",
            WARN,
            "off: the server acknowledges a commit before "
            "it is on disk, so an accepted request could be lost if the server crashes; "
            "set synchronous_commit = on for relay's database (as its owner)",
            fix=shell(
                "psql",
                DATABASE_URL,
                "-c",
                "ALTER ROLE CURRENT_USER SET synchronous_commit = on",
                changes=True,
            ),
        )
    else:
        report.add(
            "synchronous_commit",
            OK,
            f"{f['synchronous_commit']}: a request is on the "
            "server's disk before relay reports success",
        )
    host, mode = f["host"], f["sslmode"] or "prefer"
    local = host.startswith("/") or host in LOCAL_HOSTS or _loopback(host)
    where = "a unix socket" if (host == "" or host.startswith("/")) else host
    if f["ssl_in_use"]:
        report.add(
            "tls",
            OK,
            f"TLS in use (sslmode={mode})"
            + (
                ""
                if mode == "verify-full" or local
                else "; sslmode=verify-full also checks the server's certificate and name"
            ),
        )
    elif local:
        report.add("tls", OK, f"no TLS: the server is local ({where})")
    elif mode in TLS_MODES:
        report.add("tls", OK, f"sslmode={mode}")
    else:
        report.add(
            "tls",
            WARN,
            f"no TLS to {host} (sslmode={mode} does not require it): "
            "requests cross the network readable; add sslmode=verify-full to the URL "
            "(the server needs a certificate)",
            fix=_with_sslmode(report),
        )
    offset = f["clock_offset_ms"]
    text = (
        f"this machine's clock is {abs(offset) / 1000:.3f} s "
        f"{'behind' if offset >= 0 else 'ahead of'} the server's; relay uses the server's"
    )
    if abs(offset) > CLOCK_WARN_MS:
        report.add(
            "clock",
            WARN,
            text + "; other tools here do not correct for it: turn on this machine's time sync",
            fix=shell("timedatectl", "set-ntp", "true", changes=True),
        )
    else:
        report.add("clock", OK, text)
