"""The scope flags of a call, as the commands it prints carry them (design.md §14).

A command relay prints carries the scope flags the call was given on its command line
(``--home DIR``, ``--database-url URL``), so pasted into the same shell it acts on the same
home or database; a scope from the environment (``RELAY_HOME``, ``RELAY_DATABASE_URL``)
stays there, since the pasted command inherits it. The options record what they were
given here (``given``); the call's ``Scope`` (core) follows, and the output layer renders
every command with it. A password is never printed.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..core.command import NO_SCOPE, Raw, Scope
from ..core.context import Context
from ..core.errors import RelayError

# (a URL whose password relay does not print: the word reads it from the environment)
URL_FROM_ENVIRONMENT = Raw('"${RELAY_DATABASE_URL:?export the database URL first}"')
URL_NOTE = (
    "the database URL carries a password, which relay never prints: the commands read it "
    "from $RELAY_DATABASE_URL (export it first), or put the password in ~/.pgpass"
)


def given(ctx: Context, *, home: str | None = None, database_url: str | None = None) -> None:
    """A scope option of the command line (``--home``, ``--database-url``) set this call's
    ``home``/``database_url``: it becomes the call's, and its printed commands carry it."""
    if home is not None:
        ctx.home = home or ctx.home
        ctx.home_flag = home or None
    if database_url is not None:
        ctx.database_url = database_url
        ctx.database_url_flag = database_url or None
    ctx.scope = scope_of(ctx)


def scope_of(ctx: Context) -> Scope:
    """The scope flags of ``ctx``'s command line, as words (design.md §14). On PostgreSQL
    the URL names the database (the home holds no requests there): ``--database-url`` when
    the command line gave it, nothing when the environment did; else ``--home`` (absolute)
    when the command line gave it."""
    from ..store import database_url, resolve_home

    try:
        url = database_url(ctx.database_url)
    except RelayError:
        return NO_SCOPE  # the command refuses the URL itself
    if url is not None:
        if ctx.database_url_flag is None:
            return Scope(url_word=Raw('"$RELAY_DATABASE_URL"'))
        word, note = url_word(url, ctx.environ)
        return Scope(("--database-url", word), note=note, url_word=word)
    if ctx.home_flag is None:
        return NO_SCOPE
    try:
        home = str(resolve_home(ctx.home_flag, ctx.environ))
    except RelayError:
        home = ctx.home_flag
    return Scope(("--home", home))


def url_word(url: str, environ: Mapping[str, str]) -> tuple[str, str | None]:
    """The URL as one shell word, and what a person must know for it to work: the URL
    relay prints (design.md §13), when it connects as the one given (it held no secret,
    or only a password that libpq finds in PGPASSWORD or ~/.pgpass); or else read from
    $RELAY_DATABASE_URL, which the shell refuses to expand until it is exported."""
    from ..store.url import password_elsewhere, read

    reading = read(url)
    if reading.url is not None and (
        not reading.secrets
        or (reading.secrets == ("password",) and password_elsewhere(reading, environ))
    ):
        return reading.url, None
    if reading.url is not None:
        return URL_FROM_ENVIRONMENT, URL_NOTE
    return URL_FROM_ENVIRONMENT, (
        f"relay does not print the database URL ({reading.why}): the commands read it "
        "from $RELAY_DATABASE_URL (export it first)"
    )
