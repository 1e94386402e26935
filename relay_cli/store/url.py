"""Which database relay uses (design.md §13), and the one form in which relay prints it.

``database_url`` and ``check`` run on every call, so they import no driver: the URL
comes from ``--database-url`` (every command has it) or ``$RELAY_DATABASE_URL``, and the
call's context holds it as given (``core.context``).

relay never prints the URL it was given, redacted or not. ``read`` asks libpq what the
URL means (psycopg2's ``parse_dsn`` is libpq's ``PQconninfoParse``), and ``shown`` prints
a URL rebuilt from that reading alone: the user, hosts, ports, database and the
connection options on an allow-list of options that hold no secret (``PRINTED``). The
password and every other secret libpq reads from a URL (``SECRETS``) are never part of
it. A URL libpq cannot read, or reads as what no one can mean (a port that is not a
number, a host name with an ``@`` in it: a password with an unencoded ``@`` or ``/`` is
read so, and the rest of that password would be shown as the host or port), is not
printed at all: relay names where it came from (``$RELAY_DATABASE_URL``,
``--database-url``, ``--to``) and says why in words of its own, and it does not connect
with it, so no message of libpq's or the server's can quote a piece of it either.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from functools import lru_cache
from urllib.parse import quote

from ..core.errors import RelayError
from ..core.record import record

SCHEMES = ("postgresql", "postgres")
VARIABLE = "$RELAY_DATABASE_URL"
OPTION = "--database-url"
_SCHEME = r"[A-Za-z][A-Za-z0-9+.-]{0,30}"  # compiled at first use (re caches it)

# libpq's connection options (its PQconndefaults list, libpq 17 and 18) whose values
# hold no secret: the only ones a URL relay prints carries. An allow-list: an option
# not named here or in SECRETS (one a later libpq adds) makes relay print no URL.
PRINTED = frozenset(
    {
        "service",
        "user",
        "passfile",
        "channel_binding",
        "connect_timeout",
        "dbname",
        "host",
        "hostaddr",
        "port",
        "client_encoding",
        "options",
        "application_name",
        "fallback_application_name",
        "keepalives",
        "keepalives_idle",
        "keepalives_interval",
        "keepalives_count",
        "tcp_user_timeout",
        "sslmode",
        "sslnegotiation",
        "sslcompression",
        "sslcert",
        "sslkey",
        "sslcertmode",
        "sslrootcert",
        "sslcrl",
        "sslcrldir",
        "sslsni",
        "requirepeer",
        "require_auth",
        "ssl_min_protocol_version",
        "ssl_max_protocol_version",
        "min_protocol_version",
        "max_protocol_version",
        "gssencmode",
        "krbsrvname",
        "gsslib",
        "gssdelegation",
        "target_session_attrs",
        "load_balance_hosts",
        "oauth_issuer",
        "oauth_client_id",
        "oauth_scope",
    }
)
# The secrets libpq reads from a URL (its options shown as "*", and libpq 18's OAuth
# client secret and SCRAM keys): never printed. A URL without them connects where libpq
# finds them elsewhere (~/.pgpass, PGPASSWORD, a service file).
SECRETS = frozenset(
    {"password", "sslpassword", "oauth_client_secret", "scram_client_key", "scram_server_key"}
)

NO_DRIVER = "the PostgreSQL driver, which reads it, is not installed"
WRITE_IT = (
    "percent-encode a password written into a URL ('@' as %40, '/' as %2F, '%' as %25, "
    "'&' as %26, '=' as %3D), or keep it out of the URL, in ~/.pgpass or PGPASSWORD"
)
# The start of each message libpq gives for a string it cannot read, and relay's words
# for it: libpq's message goes on to quote the part where it stopped, which may be a
# piece of a password, so only these words are ever shown.
_UNREADABLE = (
    ("invalid percent-encoded token", "a '%' that starts no percent-encoded byte"),
    ("forbidden value %00", "a percent-encoded zero byte"),
    ("invalid URI query parameter", "a query parameter that names no connection option"),
    ('missing key/value separator "="', "a query parameter without '='"),
    ('extra key/value separator "="', "a query parameter with a second '='"),
    ("IPv6 host address may not be empty", "an empty IPv6 address"),
    ("end of string reached when looking for matching", "a '[' without its ']'"),
    ("unexpected character", "an unexpected character after an IPv6 address"),
)
# What a host, an address and a port can be. A host is a name or an address (letters,
# digits, '.', '-', '_', and ':' and '%' of an IPv6 address and its zone) or a socket
# directory (an absolute path); the one host may also be a socket in Linux's abstract
# namespace ('@name'), but no host of several (``u:@x,@h`` is the hosts "x" and "@h").
_HOST = re.compile(r"[\w.:%-]+|/.*", re.DOTALL)
_ADDRESS = re.compile(r"[0-9A-Fa-f.:%\w-]+")
_PORT = re.compile(r"[0-9]+")
# what a URL's authority holds as it is: a host name, an IPv4 or IPv6 address
_NAME = re.compile(r"[A-Za-z0-9._-]+|[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*")


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


def origin(url: str, environ: Mapping[str, str]) -> str:
    """Where a call's database URL came from, as relay names it when it prints no URL:
    ``$RELAY_DATABASE_URL`` when that variable of the call's ``environ`` holds it, else
    ``--database-url``."""
    try:
        from_variable = database_url(environ.get("RELAY_DATABASE_URL")) == url
    except RelayError:
        from_variable = False
    return VARIABLE if from_variable else OPTION


# ---------------------------------------------------------------------- libpq's reading
@record(frozen=True)
class Reading:
    """What relay knows of a database URL: libpq's reading of it (``read``)."""

    # the URL relay prints: rebuilt from ``parts`` alone; None when it prints none
    url: str | None = None
    # libpq's reading without the secrets (option, value), in libpq's order; empty when
    # libpq cannot read it or reads it as what no one can mean
    parts: tuple[tuple[str, str], ...] = ()
    # the secrets libpq reads from it (SECRETS: "password", "sslpassword", ...)
    secrets: tuple[str, ...] = ()
    # why relay prints no URL for it, in relay's words (nothing of the URL's), or None
    why: str | None = None
    # relay does not connect with it: libpq cannot read it, or would read part of it as
    # a host, port or database that cannot be one (``why`` says which)
    refused: bool = False

    def option(self, name: str) -> str | None:
        return dict(self.parts).get(name)


@lru_cache(maxsize=32)
def read(url: str) -> Reading:
    """libpq's reading of ``url`` (a checked URL: ``check``), without its secrets."""
    try:
        from .pg_load import load

        drv = load()
    except RelayError:  # the driver is not installed: nothing can read the URL
        return Reading(why=NO_DRIVER)
    try:
        parsed: dict[str, str] = drv.extensions.parse_dsn(url)
    except UnicodeDecodeError:  # (libpq read it; its percent-encoded bytes are no UTF-8)
        return Reading(why="it holds percent-encoded bytes that are not UTF-8", refused=True)
    except drv.Error as e:
        said = str(e).removeprefix("invalid dsn: ")
        words = next((ours for theirs, ours in _UNREADABLE if said.startswith(theirs)), None)
        return Reading(why="libpq cannot read it" + (f" ({words})" if words else ""), refused=True)
    secrets = tuple(k for k in parsed if k in SECRETS)
    parts = tuple((k, v) for k, v in parsed.items() if k not in SECRETS)
    wrong = _misread(dict(parts))
    if wrong is not None:
        return Reading(
            secrets=secrets,
            why=f"libpq reads {wrong} from it (as it does when a password holds an "
            "unencoded '@' or '/')",
            refused=True,
        )
    if any(k not in PRINTED for k, _ in parts):
        why = "it sets a connection option that relay does not know to hold no secret"
        return Reading(None, parts, secrets, why)
    printed = _rebuild(dict(parts))
    if printed is None:  # (no URL relay writes reads back as libpq read this one)
        return Reading(None, parts, secrets, "relay cannot write it again as libpq reads it")
    return Reading(printed, parts, secrets)


def _misread(parts: Mapping[str, str]) -> str | None:
    """What libpq reads from a URL as a host, address, port or database that cannot be
    one, or None. A password with an unencoded '@' or '/' leaves the rest of itself, and
    the '@' that was meant to end it, in one of those (libpq ends the user information
    at the first '@' or '/': ``u:P@ss:24@h`` is the host "ss" and the port "24@h")."""
    hosts = parts.get("host", "").split(",")
    if len(hosts) == 1 and hosts[0].startswith("@"):  # one socket in the abstract namespace
        hosts = [hosts[0][1:]]
    if not all(_HOST.fullmatch(h) for h in hosts if h):
        return "a host that is no host name, address or socket directory"
    if not all(_ADDRESS.fullmatch(a) for a in parts.get("hostaddr", "").split(",") if a):
        return "a host address that is no address"
    if not all(_PORT.fullmatch(p) for p in parts.get("port", "").split(",") if p):
        return "a port that is not a number"
    if "@" in parts.get("dbname", ""):
        return "a database name with an '@' in it"
    return None


def _rebuild(parts: Mapping[str, str]) -> str | None:
    """A URL that libpq reads as exactly ``parts``: hosts and ports in the authority when
    they fit there, else as query parameters; every value percent-encoded. None when
    neither form reads back as ``parts`` (it is checked: libpq reads it again)."""
    from .pg_load import load

    query = {k: v for k, v in parts.items() if k not in ("user", "dbname", "host", "port")}
    user, dbname = parts.get("user"), parts.get("dbname")
    hosts, ports = parts.get("host"), parts.get("port")
    head = "postgresql://" + (f"{quote(user, safe='')}@" if user else "")
    tail = f"/{quote(dbname, safe='')}" if dbname else ""
    forms = []
    names = hosts.split(",") if hosts else []
    if names and all(_NAME.fullmatch(h) for h in names):
        given = ports.split(",") if ports else [""] * len(names)
        if len(given) == len(names):
            netloc = ",".join(
                (f"[{h}]" if ":" in h else h) + (f":{p}" if p else "")
                for h, p in zip(names, given, strict=True)
            )
            forms.append(head + netloc + tail + _query(query))
    where = {k: v for k, v in (("host", hosts), ("port", ports)) if v is not None}
    forms.append(head + tail + _query({**where, **query}))
    for form in forms:
        if load().extensions.parse_dsn(form) == dict(parts):
            return form
    return None


def _query(options: Mapping[str, str]) -> str:
    if not options:
        return ""
    return "?" + "&".join(f"{k}={quote(v, safe='/:,')}" for k, v in options.items())


def shown(url: str, where: str) -> str:
    """The one form in which relay names the database of ``url`` in anything it prints,
    writes or reports (design.md §13): the URL rebuilt from libpq's reading of it,
    without its password or any other secret; when relay prints none, where it came
    from (``where``: ``$RELAY_DATABASE_URL``, ``--database-url``, ``--to``)."""
    printed = read(url).url
    return printed if printed is not None else f"named by {where}"


def printed_with(url: str, **options: str) -> str | None:
    """The URL relay prints for ``url`` with ``options`` set (doctor's command that adds
    sslmode=verify-full), or None when relay prints none for it."""
    reading = read(url)
    if reading.url is None:
        return None
    return _rebuild({**dict(reading.parts), **options})


def refusal(url: str, where: str) -> RelayError | None:
    """``usage_error`` for a URL relay does not connect with (``Reading.refused``): it
    names where the URL came from and says why, and shows nothing of it."""
    reading = read(url)
    if not reading.refused:
        return None
    return RelayError(
        "usage_error",
        f"relay cannot use the database URL in {where}: {reading.why}",
        detail=f"{WRITE_IT}; relay never prints the URL it was given",
    )


def password_elsewhere(reading: Reading, environ: Mapping[str, str]) -> bool:
    """Would libpq, run in ``environ``, find the password of the URL ``reading`` read
    without it: PGPASSWORD, or a line of the password file (the URL's passfile,
    PGPASSFILE or ~/.pgpass) matching its first host, port, database and user, as libpq
    reads them (a socket directory matches "localhost")."""
    import pwd

    if environ.get("PGPASSWORD"):
        return True

    def given(option: str, variable: str) -> str:
        return (reading.option(option) or environ.get(variable) or "").split(",")[0]

    host = given("host", "PGHOST")
    host = "localhost" if not host or host.startswith(("/", "@")) else host
    port = given("port", "PGPORT") or "5432"
    user = given("user", "PGUSER") or pwd.getpwuid(os.getuid()).pw_name
    db = given("dbname", "PGDATABASE") or user
    home = environ.get("HOME") or os.path.expanduser("~")
    path = reading.option("passfile") or environ.get("PGPASSFILE") or os.path.join(home, ".pgpass")
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read(65536).splitlines()
    except (OSError, UnicodeDecodeError):
        return False
    for line in lines:
        # fields end at a ':' that no backslash escapes (libpq's "\:" in a field)
        fields = [re.sub(r"\\(.)", r"\1", f) for f in re.split(r"(?<!\\):", line)]
        if line.startswith("#") or len(fields) < 5:
            continue
        if all(
            f in ("*", want) for f, want in zip(fields[:4], (host, port, db, user), strict=True)
        ):
            return True
    return False
