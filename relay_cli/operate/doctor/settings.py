"""The relay area's settings from the environment (design.md §8, §4): the clock's offset
(RELAY_TIME_OFFSET) and the queue cap (RELAY_QUEUE_CAP)."""

from __future__ import annotations

import time

from ...core import clock
from ...core.command import shell
from ...core.errors import RelayError
from .report import FAIL, OK, WARN, Report


def check_clock(report: Report) -> int:
    now_clock = report.checked.clock
    raw = now_clock.offset.strip()
    if not raw:
        report.add("time_offset", OK, "RELAY_TIME_OFFSET is not set: relay uses the system clock")
        return now_clock.now_ms()
    try:
        offset = now_clock.offset_seconds()
    except RelayError as e:
        report.add(
            "time_offset",
            FAIL,
            f"{e.message}; every relay command will refuse to run",
            fix=shell("unset", "RELAY_TIME_OFFSET"),
        )
        return int(time.time() * 1000)
    report.add(
        "time_offset",
        WARN,
        f"RELAY_TIME_OFFSET={raw}: relay's clock is shifted by {offset:g} s "
        f"({clock.human_duration(abs(offset))} {'ahead' if offset >= 0 else 'behind'}); "
        "it is for tests and rehearsals",
        fix=shell("unset", "RELAY_TIME_OFFSET"),
    )
    return now_clock.now_ms()


def check_queue_cap(report: Report) -> None:
    limits = report.checked.limits
    try:
        cap = limits.queue_cap()
    except RelayError as e:
        report.facts["queue_cap"] = None
        report.add(
            "queue_cap",
            FAIL,
            f"{e.message}; every send and submit refuses to run (usage_error)",
            fix=shell("unset", "RELAY_QUEUE_CAP"),
        )
        return
    report.facts["queue_cap"] = cap
    if not cap:
        report.add(
            "queue_cap", OK, "none (RELAY_QUEUE_CAP=0): a recipient's queue may grow without bound"
        )
    else:
        source = "RELAY_QUEUE_CAP" if limits.queue_cap_given() else "the default"
        report.add("queue_cap", OK, f"{cap} open requests per recipient ({source})")
