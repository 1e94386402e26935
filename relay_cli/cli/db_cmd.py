"""relay's data for a person's own tools: `relay db path` and `relay export`; and
`relay db copy`, which moves it into PostgreSQL (design.md §13)."""

from __future__ import annotations

import os
from typing import Annotated, Optional

import typer

from ..core import clock
from ..core.limits import EXPORT_SINCE
from ..operate import export as export_lib
from ..requests import validate
from .app import Env, HomeOpt, JsonOpt, StatesOpt, app, examples
from .click_seam import Choice

db_app = typer.Typer(
    help="Where relay.db is, for your own tools; copying it into PostgreSQL.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(db_app, name="db")


@db_app.command(
    epilog=examples(
        "relay db path",
        'sqlite-utils tables "$(relay db path)" --counts',
        'sqlite-utils rows "$(relay db path)" requests_view --csv',
        'datasette "$(relay db path)"',
    )
)
def path(json_: JsonOpt = False, home: HomeOpt = None) -> int:
    """Print the path of relay.db, so other tools can read it (docs/data.md: its views).

    Creates nothing: when relay.db does not exist yet it prints the path it will have and
    says so on stderr (--json: "exists": false). An unsafe state directory is refused
    (unsafe_state_dir) as by every command. Read the database; writing to it by hand
    voids relay's guarantees. With a PostgreSQL database URL there is no file: refused
    (usage_error).
    """
    from ..store import database_file

    env = Env(json_, home)
    db = str(database_file(env.home, env.ctx.database_url, environ=env.ctx.environ))
    exists = os.path.exists(db)
    if env.json:
        env.out.json(export_lib.path_object(db, exists))
        return 0
    env.out.line(db)
    if not exists:
        env.out.note(
            "relay.db does not exist yet; the first relay command that starts from "
            "nothing creates it (e.g. relay peers join NAME)"
        )
    return 0


@app.command(
    epilog=examples(
        "relay export --format md --since 7d > week.md",
        "relay export --format csv --state delivery_unknown > unknown.csv",
        "relay export --since 1d | jq -r .state | sort | uniq -c",
    )
)
def export(
    format_: Annotated[
        str,
        typer.Option(
            "--format",
            metavar="FORMAT",
            click_type=Choice(export_lib.FORMATS, export_lib.validate_format),
            help="jsonl: one request object per line; csv: every field; md: a "
            "Markdown table of id, peers, state, reason, times, size, detail.",
        ),
    ] = "jsonl",
    state: StatesOpt = None,
    since: Annotated[
        Optional[str],
        typer.Option(
            "--since",
            metavar="D",
            help=f"Only requests created in the last D (e.g. 7d; {clock.span(EXPORT_SINCE)}).",
        ),
    ] = None,
    json_: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Report errors as one JSON line on stderr (the "
            "output is always the chosen format).",
        ),
    ] = False,
    home: HomeOpt = None,
) -> int:
    """Requests for reports: JSON lines, CSV or Markdown, oldest first.

    Without text or reply: the requests `relay list --all` shows (tombstones are left
    out), after due time-based transitions are applied, so no state is stale. CSV and
    Markdown are human output: peer text is made inert, cells a spreadsheet would run as
    a formula start with ', and Markdown escapes \\ and |. Reads only; bodies: relay show ID.
    """
    env = Env(json_, home, creates=False)
    fmt = export_lib.validate_format(format_)
    states = validate.validate_states(state)
    since_s = None if since is None else clock.parse_duration(since, EXPORT_SINCE, "--since")
    out = env.out.stdout
    with env.unit(write=False) as now:
        objects = export_lib.requests(env.store, now, states, since_s)
        if fmt == "jsonl":
            for obj in objects:
                env.out.json(obj)
        elif fmt == "csv":
            export_lib.write_csv(out, objects)
        else:
            export_lib.write_md(out, objects)
    out.flush()
    return 0


@db_app.command(
    epilog=examples(
        "relay db copy --to 'postgresql://relay@db/relay?sslmode=verify-full'",
        'relay db copy --to "$RELAY_DATABASE_URL" --json',
    )
)
def copy(
    to: Annotated[
        str, typer.Option("--to", metavar="URL", help="The empty PostgreSQL database to fill.")
    ],
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """Copy everything in the local relay.db into an empty PostgreSQL database.

    Requests, events, tombstones, drafts, peers, sessions, the ledger and the hook's
    state, in one transaction: all of it or nothing. A target that already holds relay
    data is refused (state_conflict) and left as it was. relay.db is not changed; point
    every agent at the new database afterwards (RELAY_DATABASE_URL).
    """
    from ..store import resolve_home
    from ..store.url import check

    env = Env(json_, home)
    url = check(to.strip())
    from ..store.copy import copy as copy_db

    result = copy_db(resolve_home(env.home, env.ctx.environ), url, env.ctx.environ)
    if env.json:
        env.out.json(result)
    else:
        total = sum(result["copied"].values())
        env.out.line(
            f"copied {total} rows from {result['from']} to the database {result['to']} "
            f"(schema {result['schema_version']}):"
        )
        env.out.fields([(t, str(n)) for t, n in result["copied"].items()])
        env.out.line(
            "relay.db is unchanged. Point every agent at the new database: "
            "export RELAY_DATABASE_URL='<the URL>' (without a password: use "
            "~/.pgpass)."
        )
    return 0
