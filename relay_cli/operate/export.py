"""`relay export`: requests for a person's reports, as JSON lines, CSV or a Markdown table.

Every format is built from the one request object (``objects.request_object``,
design.md §7). JSON lines are the request objects exactly as `--json` prints them. CSV and
Markdown are human output: every cell is made inert like a table cell on a terminal
(``output.inert_line``); CSV cells that a spreadsheet would run as a formula are
prefixed with ``'``; Markdown escapes ``\\`` and ``|`` so a cell cannot end its column.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, TextIO

from ..core.errors import RelayError
from ..core.output import inert_line
from ..requests.objects import request_object

if TYPE_CHECKING:
    from relay_cli.store import DataStore, Record

    from ..core.output import JsonObject

FORMATS = ("jsonl", "csv", "md")


def path_object(path: str, exists: bool) -> JsonObject:
    """What `relay db path --json` answers: relay.db's path, and whether it exists yet."""
    return {"path": path, "exists": exists}


# Markdown is for reading: the columns of `relay list` with exact times and the detail.
MD_COLUMNS = (
    "id",
    "from",
    "to",
    "state",
    "reason",
    "created_at",
    "finished_at",
    "text_bytes",
    "detail",
)

# A spreadsheet runs a cell that starts with one of these as a formula (OWASP's list).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def validate_format(value: str) -> str:
    if value not in FORMATS:
        raise RelayError("usage_error", f"--format must be jsonl, csv or md, not {value!r}")
    return value


def csv_columns() -> list[str]:
    """CSV has every field of the request object, in its order (``relay schema``)."""
    from ..requests.objects import request_fields

    always: list[str] = request_fields()["always"]
    return always


def objects(rows: Iterable[Record]) -> Iterator[JsonObject]:
    """The request objects of ``rows`` (without text and reply, as `list` prints them)."""
    for row in rows:
        yield request_object(row)


def requests(
    store: DataStore, now: int, states: list[str], since_s: int | None
) -> Iterator[JsonObject]:
    """What `relay export` writes: the requests `list --all` shows (no tombstones), oldest
    first, in ``states`` (all when empty), created in the last ``since_s`` seconds (all
    when None). Read inside ``due.unit(write=False)``, so no state is stale."""
    return objects(store.export_requests(states, None if since_s is None else now - since_s * 1000))


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return inert_line(value)


def csv_cell(value: object) -> str:
    s = _cell(value)
    return "'" + s if s.startswith(_FORMULA_START) else s


def md_cell(value: object) -> str:
    s = _cell(value) if value is not None else "-"
    return s.replace("\\", "\\\\").replace("|", "\\|")


def write_csv(out: TextIO, objs: Iterable[JsonObject]) -> int:
    import csv  # imported here: only `relay export --format csv` writes CSV

    columns = csv_columns()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    n = 0
    for obj in objs:
        writer.writerow([csv_cell(obj[c]) for c in columns])
        n += 1
    return n


def write_md(out: TextIO, objs: Iterable[JsonObject]) -> int:
    out.write("| " + " | ".join(MD_COLUMNS) + " |\n")
    out.write("|" + "|".join("---" for _ in MD_COLUMNS) + "|\n")
    n = 0
    for obj in objs:
        out.write("| " + " | ".join(md_cell(obj[c]) for c in MD_COLUMNS) + " |\n")
        n += 1
    return n
