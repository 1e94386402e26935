"""Which database relay uses (design.md §13): the local relay.db, or a PostgreSQL URL.

Light on purpose: it runs on every call, so it imports no driver. The URL comes from
``--database-url`` (every command has it) or ``$RELAY_DATABASE_URL``: the call's context
holds it as given (``core.context``), and the store is opened with it.

A URL is read here exactly as libpq reads it (``conninfo_uri_parse_options``), not as
``urllib`` does: in libpq only ``@`` and ``/`` end the user information, so a password
may hold an unencoded ``#``, ``?`` or ``:``, and ``#`` means nothing anywhere. What libpq
would take as a password (``user:password@``, ``password=`` and ``sslpassword=`` in the
query) is what relay removes; the rest of the URL is kept byte for byte, so the URL
without its password connects exactly as the original did (design.md §13).
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

from ..core.errors import RelayError

SCHEMES = ("postgresql", "postgres")
INSTALL = "pip install 'relay-cli[postgres]'"
# libpq's connection options that hold a secret
SECRET_KEYS = ("password", "sslpassword")
# libpq's options whose value may hold a plain '@' (a user "me@corp")
_NAMING_KEYS = ("user", "dbname", "application_name", "fallback_application_name", "options")
_SCHEME = r"[A-Za-z][A-Za-z0-9+.-]{0,30}"  # compiled at first use (re caches it)


def database_url(given: str | None) -> str | None:
    """The PostgreSQL URL a call uses, from the URL it was given (its context's
    ``database_url``), or None for the local relay.db (none given, or blank).

    Any other scheme is ``usage_error``: relay never guesses what a URL means.
    """
    url = (given or "").strip()
    return check(url) if url else None


def check(url: str) -> str:
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme.lower() not in SCHEMES:
        # Not a URL relay reads, so nothing of it but a plain scheme is shown: a
        # key=value conninfo string ("host=h password=p") would be shown in clear.
        shown = f"{scheme}://…" if re.fullmatch(_SCHEME, scheme) else "(no scheme)"
        raise RelayError(
            "usage_error",
            f"the database URL must start with postgresql:// or postgres://, not {shown}",
        )
    # libpq knows the scheme in lower case only (it would read "POSTGRESQL://..." as a
    # key=value string and quote it, password and all, in its error)
    return scheme.lower() + url[len(scheme) :]


# ---------------------------------------------------------------------- libpq's reading
def _secret_spans(url: str, cautious: bool) -> list[tuple[int, int, int]]:
    """Where the secrets are in ``url``: (start, end, value_start) spans, the text
    removed being ``url[start:end]`` and the secret itself ``url[value_start:end]``.

    libpq's reading: the password of ``user:password@`` (the span starts at its ':'),
    and each ``password=``/``sslpassword=`` query parameter (the span starts at its
    '&' or, for the first parameter, at the parameter itself). With ``cautious``, also
    what a mistyped URL might hold of a password that libpq reads otherwise (an
    unencoded '@' or '/' in it): libpq refuses or misroutes such a URL, so showing less
    of it costs nothing.
    """
    if "://" not in url:
        return []
    n = len(url)
    start = url.index("://") + 3
    spans: list[tuple[int, int, int]] = []
    p = start
    while p < n and url[p] not in "@/":
        p += 1
    host_start = start
    if p < n and url[p] == "@":
        at = p
        colon = url.find(":", start, at)
        if colon >= 0:
            spans.append((colon, at, colon + 1))
        host_start = at + 1
    # hosts and ports: "h1:p1,h2:p2" (an IPv6 address in brackets)
    p = host_start
    prev = ""
    while True:
        if p < n and url[p] == "[":
            close = url.find("]", p + 1)
            if close < 0:
                return spans
            p = close + 1
        else:
            while p < n and url[p] not in ":/?,":
                p += 1
        prev = url[p] if p < n else ""
        if prev == ":":
            port0 = p + 1
            p += 1
            while p < n and url[p] not in "/?,":
                p += 1
            port = url[port0:p]
            if cautious and port and not port.isdigit():
                # "u:pa/ss@host": no user information for libpq, whose port is then
                # "pa" (refused); the rest of the password comes later, up to an '@'
                q = url.find("?", p)
                last_at = url.rfind("@", p, q if q >= 0 else n)
                end = last_at if last_at >= 0 else p
                spans.append((port0 - 1, end, port0))
                p = max(p, end)
                if url.find("/", p) < 0 and url.find("?", p) < 0:
                    return spans
            prev = url[p] if p < n else ""
        if prev != ",":
            break
        p += 1
    if prev and prev != "?":  # the database name, up to the query
        while p < n and url[p] != "?":
            p += 1
        prev = url[p] if p < n else ""
    if prev != "?":
        return _with_mistyped_userinfo(url, start, spans, cautious, n)
    # the query: keyword=value pairs separated by '&', both percent-decoded
    query = p
    pos = p + 1
    pieces = url[pos:].split("&")
    i = 0
    first = True
    while i < len(pieces):
        piece = pieces[i]
        key = unquote(piece.split("=", 1)[0]) if "=" in piece else None
        end = pos + len(piece)
        if key in SECRET_KEYS:
            j = i + 1
            # a password with an unencoded '&': what follows without '=' is part of it
            while cautious and j < len(pieces) and "=" not in pieces[j]:
                end += 1 + len(pieces[j])
                j += 1
            spans.append((pos - 1 if not first else pos, end, pos + piece.index("=") + 1))
            pos = end + 1
            i = j
            continue
        first = False
        pos = end + 1
        i += 1
    return _with_mistyped_userinfo(url, start, spans, cautious, query)


def _with_mistyped_userinfo(
    url: str, start: int, spans: list[tuple[int, int, int]], cautious: bool, query: int
) -> list[tuple[int, int, int]]:
    """``spans`` and, with ``cautious``, what a person may have meant as the password
    of ``user:password@`` when it holds an unencoded '@', '/' or '?'.

    libpq ends the user information at the first '@' or '/' (``u:Xk9@Lm2/Qr7@host``
    is the password "Xk9", the host "Lm2" and the database "Qr7@host"), so what the
    person meant runs from the first ':' to the last '@' of the URL: any '@' but one
    inside a password libpq itself finds (``?password=x@y``) or in the value of a
    parameter that names someone or something (``?user=me@corp``, from ``query``, the
    index of libpq's '?'). Such a URL is refused or misrouted by libpq, so hiding more
    of it costs nothing.
    """
    if not cautious:
        return spans
    last_at = -1
    for k in range(len(url) - 1, start - 1, -1):
        if url[k] != "@" or any(v <= k < e for _, e, v in spans):
            continue
        if k > query:
            piece_start = url.rfind("&", query, k) + 1 or query + 1
            key, eq, _ = url[max(piece_start, query + 1) : k].partition("=")
            if eq and unquote(key) in _NAMING_KEYS:
                continue
        last_at = k
        break
    if last_at < 0:
        return spans
    p = start
    if url.startswith("[", start):  # an IPv6 host: its ':' are no password
        close = url.find("]", start, last_at)
        p = close + 1 if close >= 0 else start
    colon = url.find(":", p, last_at)
    if colon >= 0:
        spans.append((colon, last_at, colon + 1))
    return spans


def _cut(url: str, cautious: bool) -> str:
    spans = _secret_spans(url, cautious)
    if not spans:
        return url
    out, last = [], 0
    for s, e, _ in sorted(spans):
        if s < last:  # overlapping spans (a mistyped URL) are cut as one
            last = max(last, e)
            continue
        out.append(url[last:s])
        last = e
    out.append(url[last:])
    text = "".join(out)
    # the first query parameter removed: "?&next=..." becomes "?next=...", "?" at the end goes
    text = text.replace("?&", "?")
    return text[:-1] if text.endswith("?") else text


def without_password(url: str) -> str:
    """``url`` without what libpq would take as a password, otherwise byte for byte the
    same, so it connects exactly as ``url`` did with the password from ``~/.pgpass`` or
    ``PGPASSWORD`` (``postgresql:///db?host=/run/pg`` stays as it is)."""
    return _cut(url, cautious=False)


def redact(url: str) -> str:
    """The URL as relay shows it: without its password, and without anything of a
    mistyped URL that could be part of one. This is the only form in which relay
    prints or reports a URL (design.md §13)."""
    if "://" not in url:
        return "(a database URL that cannot be read)"
    return _cut(url, cautious=True)


def secrets_of(url: str) -> list[str]:
    """Every form in which the URL's password could appear in a driver's message."""
    found: set[str] = set()
    for _, e, v in _secret_spans(url, cautious=True):
        raw = url[v:e]
        if not raw:
            continue
        found.update((raw, unquote(raw)))
        # the pieces libpq reads elsewhere when a password holds an unencoded '@', '/'
        # or '&' (a host "ss@host", a port "pa"): long ones anywhere, short ones only
        # where libpq quotes them or an '@' follows
        for part in re.split(r"[@/&:?,]", raw):
            if len(part) >= 3:
                found.update((part, unquote(part)))
            elif part:
                found.update((f'"{part}"', f"{part}@", f'"{unquote(part)}"'))
    forms: set[str] = set()
    for f in found:
        if f:
            forms.update((f, quote(f, safe=""), quote(f)))
    return sorted(forms, key=len, reverse=True)


def password_of(url: str) -> str | None:
    """The password written in the URL as libpq reads it (the last one wins), if any."""
    found = None
    for s, e, v in _secret_spans(url, cautious=False):
        if url[s] == ":" or url[s:v].lstrip("&?").split("=")[0] == "password":
            found = unquote(url[v:e]) if url[v:e] else found
    return found


def scrub(text: str, url: str | None) -> str:
    """``text`` with the URL's password (in every form a message may hold) replaced."""
    if not url:
        return text
    if url in text:
        text = text.replace(url, redact(url))
    for form in secrets_of(url):
        text = text.replace(form, "***")
    return text
