"""Which database relay uses (design.md §13): the local relay.db, or a PostgreSQL URL.

Light on purpose: it runs on every call, so it imports no driver. The URL comes from
``--database-url`` (every command has it) or ``$RELAY_DATABASE_URL``.
"""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

from ..errors import RelayError

SCHEMES = ("postgresql", "postgres")
INSTALL = "pip install 'relay-cli[postgres]'"

_override: str | None = None


def set_database_url(url: str | None) -> None:
    """``--database-url``: wins over ``$RELAY_DATABASE_URL`` for this call."""
    global _override
    _override = url


def database_url() -> str | None:
    """The PostgreSQL URL this call uses, or None for the local relay.db.

    Any other scheme is ``usage_error``: relay never guesses what a URL means.
    """
    if not database_url_given():
        return None
    url = (_override if _override is not None else os.environ["RELAY_DATABASE_URL"]).strip()
    check(url)
    return url


def database_url_given() -> bool:
    """Whether this call names a database URL at all (valid or not), without checking it."""
    url = _override if _override is not None else os.environ.get("RELAY_DATABASE_URL")
    return bool((url or "").strip())


def check(url: str) -> str:
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in SCHEMES:
        shown = redact(url) if scheme else "(no scheme)"
        raise RelayError(
            "usage_error",
            f"the database URL must start with postgresql:// or postgres://, not {shown}",
        )
    return url


def redact(url: str) -> str:
    """The URL without any password: the one in ``user:password@`` and ``?password=``.

    This is the only form in which relay ever prints, exports or reports a URL.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(a database URL that cannot be parsed)"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostinfo = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}@{hostinfo}" if user else hostinfo
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        kept = [(k, v) for k, v in pairs if k.lower() != "password"]
        if len(kept) != len(pairs):
            query = urlencode(kept, quote_via=quote, safe="/")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def password_of(url: str) -> str | None:
    """The password written in the URL, if any (to scrub it from messages)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    for k, v in parse_qsl(parts.query, keep_blank_values=True):
        if k.lower() == "password" and v:
            return v
    return parts.password or None


def scrub(text: str, url: str | None) -> str:
    """``text`` with the URL's password (raw and percent-encoded) replaced."""
    if not url:
        return text
    secret = password_of(url)
    if secret:
        plain = unquote(secret)
        for form in sorted({secret, plain, quote(plain, safe=""), quote(plain)}, key=len,
                           reverse=True):
            if form:
                text = text.replace(form, "***")
    if url in text:
        text = text.replace(url, redact(url))
    return text
