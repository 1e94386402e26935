"""`relay db`: moving relay's data between databases (design.md §13)."""

from __future__ import annotations

from typing import Annotated

import typer

from .app import Env, HomeOpt, JsonOpt, RelayGroup, app, examples

db_app = typer.Typer(cls=RelayGroup,
                     help="Move relay's data: copy the local relay.db into PostgreSQL.",
                     no_args_is_help=True, rich_markup_mode=None)
app.add_typer(db_app, name="db")


@db_app.command(epilog=examples(
    "relay db copy --to 'postgresql://relay@db/relay?sslmode=verify-full'",
    "relay db copy --to \"$RELAY_DATABASE_URL\" --json",
))
def copy(
    to: Annotated[str, typer.Option("--to", metavar="URL",
                                    help="The empty PostgreSQL database to fill.")],
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

    result = copy_db(resolve_home(home), url)
    if env.json:
        env.out.json(result)
    else:
        total = sum(result["copied"].values())
        env.out.line(f"copied {total} rows from {result['from']} to {result['to']} "
                     f"(schema {result['schema_version']}):")
        env.out.fields([(t, str(n)) for t, n in result["copied"].items()])
        env.out.line("relay.db is unchanged. Point every agent at the new database: "
                     "export RELAY_DATABASE_URL='<the URL>' (without a password: use "
                     "~/.pgpass).")
    return 0
