"""A database URL's password is never printed, nor any piece of it (design.md §13).

relay never prints the URL it was given: it prints one rebuilt from libpq's reading of it
(``relay_cli.store.url``), and for a URL libpq cannot read, or reads as what no one can
mean, it prints none and names where the URL came from. The proof is a fuzz over random
passwords (``@/?#:%&``, unicode, letters) written into every URL form, through every
output (doctor's text and JSON, errors, `peers join --shell`, export, `db path`, `db
copy`, the hook's SessionStart output and its env file), on a server that is up, one that
refuses and a wrong password; and every URL relay exports connects.
"""

from __future__ import annotations

import json
import os
import shlex
import string
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import quote

import pytest
from conftest import Relay
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from testsupport import pgserver

SEPARATORS = "@/?#:%&=,"
# Characters relay's own words never hold: a piece of a fuzzed password that holds one
# can only have come from the password.
MARKERS = "äöüßжλ雪ñЯ"


def windows(pw: str, size: int = 3) -> set[str]:
    return {pw[i : i + size] for i in range(len(pw) - size + 1)}


def _forms_of(piece: str) -> set[str]:
    """A piece as a message may hold it: raw, percent-encoded, escaped in JSON."""
    return {piece, quote(piece, safe=""), quote(piece), json.dumps(piece)[1:-1]}


def leaked(text: str, pw: str) -> list[str]:
    """The pieces of three characters or more of ``pw`` that ``text`` holds (those with a
    marker in them: any other could be relay's own words)."""
    return sorted(
        w for w in windows(pw) if set(w) & set(MARKERS) and any(f in text for f in _forms_of(w))
    )


def forms(pw: str, port: int, sock: str | Path = "/run/pg", dead: int = 1) -> list[str]:
    """``pw`` written into every URL form a person uses (and a key=value string)."""
    enc = quote(pw, safe="")
    user, at = pgserver.SUPERUSER, f"127.0.0.1:{port}"
    return [
        f"postgresql://{user}:{pw}@{at}/relay",
        f"postgresql://{user}:{enc}@{at}/relay",
        f"postgres://{user}:{pw}@{at}/relay?sslmode=disable",
        f"POSTGRESQL://{user}:{pw}@{at}/relay",
        f"postgresql://{user}@{at}/relay?password={pw}",
        f"postgresql://{user}@{at}/relay?sslmode=disable&password={enc}&application_name=x",
        f"postgresql://{user}@{at}/relay?sslpassword={pw}",
        f"postgresql://{user}:{pw}@/relay?host={sock}&port={port}",
        f"postgresql://{user}:{pw}@{quote(str(sock), safe='')}:{port}/relay",
        f"postgresql://{user}:{pw}@127.0.0.1:{dead},{at}/relay",
        f"host=127.0.0.1 port={port} user={user} password={pw} dbname=relay",
        f"host=127.0.0.1 port={port} user={user} password='{pw}' dbname=relay",
    ]


# ------------------------------------------------------------ the review's examples
@pytest.mark.one_backend
@pytest.mark.parametrize("key", ["password", "sslpassword"])
def test_a_url_libpq_cannot_read_is_named_and_not_printed(relay, key):
    """``relay:ab/cd?ef@...`` has no user information for libpq (it ends at the '/'), so
    its query is "ef@127.0.0.1:5432/db?password=...": libpq cannot read it. The
    redacting design printed ``postgresql://relay@127.0.0.1:5432/db?password=TopSecret1``."""
    url = f"postgresql://relay:ab/cd?ef@127.0.0.1:5432/db?{key}=TopSecret1"
    runs = {
        "env": [
            relay("doctor", env={"RELAY_DATABASE_URL": url}),
            relay("doctor", "--json", env={"RELAY_DATABASE_URL": url}),
            relay("list", "--json", env={"RELAY_DATABASE_URL": url}),
        ],
        "option": [relay("list", "--json", "--database-url", url)],
    }
    for given_by, results in runs.items():
        for r in results:
            text = r.out + r.err
            assert r.code != 0 and not any(p in text for p in ("TopSecret1", "Secret", "ef@1"))
            where = "$RELAY_DATABASE_URL" if given_by == "env" else "--database-url"
            assert f"the URL in {where}" in text or f"URL in {where}" in text, text
            assert "libpq cannot read it" in text, text
    assert runs["option"][0].error["code"] == "usage_error"


@pytest.mark.one_backend
@pytest.mark.parametrize(
    "pw,pieces",
    [
        ("P@ssw0rd:2024", ["ssw0rd", "@2024", "2024", "P@ss", "relay@ss"]),
        ("Winter@2024:Blue", ["Winter", "@2024", "2024", "Blue", "relay@20"]),
        ("P@ssw0rd", ["ssw0rd", "P@ss", "relay@ss"]),
    ],
)
def test_a_password_with_an_unencoded_at_sign_shows_no_piece_of_itself(relay, pw, pieces):
    """libpq ends the password at the first '@': ``relay:P@ssw0rd:2024@host`` is the host
    "ssw0rd" and the port "2024@host". The redacting design printed
    ``postgresql://relay@ssw0rd/relay`` (and ``…@2024/relay``); relay now prints no URL,
    and does not connect with it."""
    url = f"postgresql://relay:{pw}@db.example.internal:5432/relay"
    results = [
        relay("doctor", env={"RELAY_DATABASE_URL": url}),
        relay("doctor", "--json", env={"RELAY_DATABASE_URL": url}),
        relay("list", "--json", env={"RELAY_DATABASE_URL": url}),
        relay("peers", "join", "bob", "--shell", "--database-url", url),
        relay("db", "path", "--database-url", url),
    ]
    for r in results:
        text = r.out + r.err
        assert r.code != 0 and not [p for p in pieces if p in text], (pieces, text)
        assert "unencoded '@' or '/'" in text, text
    assert results[2].error["code"] == "usage_error"
    checks = {c["name"]: c for c in results[1].json["checks"]}
    assert checks["database_url"]["status"] == "fail" and "reachable" not in checks


@pytest.mark.one_backend
@pytest.mark.parametrize("pw,pieces", [("1:ab/", ["1:ab", ":ab"]), ("12:Key/", ["12:", ":Ke"])])
def test_an_error_shows_no_piece_of_a_password_next_to_a_separator(relay, pw, pieces):
    """``relay:1:ab/@host`` has no user information for libpq (the '/' comes first): the
    host "relay" and the port "1:ab". The redacting design passed libpq's message on,
    scrubbed of what it knew as the password: ``invalid integer value "1:ab" for
    connection option "port"`` (and ``"12:***"``)."""
    url = f"postgresql://relay:{pw}@127.0.0.1:5432/relay"
    r = relay("list", "--json", env={"RELAY_DATABASE_URL": url})
    assert r.error["code"] == "usage_error" and "a port that is not a number" in r.err
    doctor = relay("doctor", "--json", env={"RELAY_DATABASE_URL": url}).json
    details = [c["detail"] for c in doctor["checks"] if c["group"] == "database"]
    assert not [p for p in pieces for text in [r.err, *details] if p in text], [r.err, details]


@pytest.mark.one_backend
def test_without_the_driver_no_url_is_printed(relay):
    """Nothing can read the URL without libpq, so relay prints none: it names the variable
    (a real process in which psycopg2 cannot be imported, as without the extra)."""
    import sys

    url = "postgresql://relay:Ab9Qz@db.example.internal:5432/relay?sslmode=require"
    code = "import sys; sys.modules['psycopg2'] = None\nfrom relay_cli.cli import main; main()"
    runs = [
        subprocess.run(
            [sys.executable, "-c", code, *argv],
            capture_output=True,
            text=True,
            env=relay._env({"RELAY_DATABASE_URL": url}),
            timeout=60,
        )
        for argv in (["doctor", "--json"], ["db", "path"], ["show", "0123abcd", "--json"])
    ]
    for p in runs:
        assert "postgresql://" not in p.stdout + p.stderr and "Ab9Qz" not in p.stdout + p.stderr
    checks = {c["name"]: c for c in json.loads(runs[0].stdout)["checks"]}
    assert checks["database_url"]["detail"].startswith(
        "the URL in $RELAY_DATABASE_URL, which relay does not print: the PostgreSQL driver"
    )
    assert "driver is not installed" in checks["reachable"]["detail"]
    assert "database named by $RELAY_DATABASE_URL" in runs[1].stderr, runs[1].stderr


@pytest.mark.one_backend
def test_a_conninfo_string_or_another_scheme_is_refused_without_showing_it(relay):
    for value in ("host=h password=Hash#Pw9 dbname=a://b", "mysql://u:Hash#Pw9@h/db"):
        r = relay("list", "--json", "--database-url", value)
        assert (r.code, r.error["code"]) == (2, "usage_error")
        assert "Hash#Pw9" not in r.out + r.err and "Hash" not in r.out + r.err


# ------------------------------------------------------------ libpq's reading
def _driver():
    if not pgserver.driver_available():
        pytest.skip("the PostgreSQL driver is not installed")
    import psycopg2.extensions

    return psycopg2.extensions


@pytest.mark.one_backend
def test_every_option_of_libpq_is_printed_or_a_secret():
    """The allow-list is checked against the libpq relay runs with (PQconndefaults): each
    of its options is one relay prints or one of the secrets, and each option libpq
    itself shows as "*" (a password) is a secret."""
    import ctypes

    ext = _driver()
    from relay_cli.store.url import PRINTED, SECRETS

    class Option(ctypes.Structure):
        _fields_ = [
            ("keyword", ctypes.c_char_p),
            ("envvar", ctypes.c_char_p),
            ("compiled", ctypes.c_char_p),
            ("val", ctypes.c_char_p),
            ("label", ctypes.c_char_p),
            ("dispchar", ctypes.c_char_p),
            ("dispsize", ctypes.c_int),
        ]

    import psycopg2._psycopg as binding

    libpq = ctypes.CDLL(binding.__file__)  # (dlsym looks in the libpq it links)
    libpq.PQconndefaults.restype = ctypes.POINTER(Option)
    options = libpq.PQconndefaults()
    found, i = {}, 0
    while options[i].keyword:
        found[options[i].keyword.decode()] = options[i].dispchar.decode()
        i += 1
    assert ext.libpq_version() >= 100000 and "password" in found
    unknown = {k for k in found if k not in PRINTED | SECRETS} - {"replication"}
    assert not unknown, unknown  # ("replication": relay never connects so; not printed)
    assert {k for k, d in found.items() if d == "*"} <= SECRETS
    assert not PRINTED & SECRETS


@pytest.mark.one_backend
@pytest.mark.parametrize(
    "url,printed",
    [
        ("postgresql://relay:s3cret@db.example/relay", "postgresql://relay@db.example/relay"),
        ("postgres://relay@db.example:5433/relay", "postgresql://relay@db.example:5433/relay"),
        (
            "postgresql://u:p@h1:5432,h2:5433/db?sslmode=verify-full&sslpassword=k",
            "postgresql://u@h1:5432,h2:5433/db?sslmode=verify-full",
        ),
        ("postgresql://[::1]:5432/db?password=x", "postgresql://[::1]:5432/db"),
        ("postgresql:///relay?host=/run/postgresql", "postgresql:///relay?host=/run/postgresql"),
        ("postgresql://%2Frun%2Fpg:5433/relay", "postgresql:///relay?host=/run/pg&port=5433"),
        ("postgresql://me%40corp@h/d%2Fb", "postgresql://me%40corp@h/d%2Fb"),
        (
            "postgresql://h/db?application_name=a+b&options=-c%20x%3Dy",
            "postgresql://h/db?options=-c%20x%3Dy&application_name=a%2Bb",
        ),
        ("postgresql://u:Hash#Pw9@h/db", "postgresql://u@h/db"),
        ("postgresql://", "postgresql://"),
    ],
)
def test_the_printed_url_is_libpqs_reading_without_its_secrets(url, printed):
    ext = _driver()
    from relay_cli.store.url import read

    assert read(url).url == printed
    libpq = ext.parse_dsn(url)
    for key in ("password", "sslpassword"):
        libpq.pop(key, None)
    assert ext.parse_dsn(printed) == libpq


@pytest.mark.one_backend
@pytest.mark.parametrize(
    "url,why",
    [
        ("postgresql://u@h/db?password=a%zz", "a '%' that starts no percent-encoded byte"),
        ("postgresql://u@h/db?password=a&b", "a query parameter without '='"),
        ("postgresql://u:12/cd@h/db", "a database name with an '@' in it"),
        ("postgresql://u:p@ss@h/db", "a host that is no host name"),
        ("postgresql://u@h/db?replication=1", "relay does not know to hold no secret"),
    ],
)
def test_a_url_relay_prints_none_for_says_why_in_its_own_words(url, why):
    _driver()
    from relay_cli.store.url import read

    reading = read(url)
    assert reading.url is None and why in (reading.why or "")
    assert reading.refused == ("replication" not in url)


# Passwords for libpq's reading alone: any character of the alphabet anywhere.
any_password = st.text(
    alphabet=st.sampled_from(list(SEPARATORS * 3) + list(string.ascii_letters + string.digits)),
    min_size=1,
    max_size=16,
) | st.text(alphabet=SEPARATORS + "ab12" + MARKERS, min_size=1, max_size=12)


def twin(pw: str) -> str:
    """``pw`` with every letter, digit and marker replaced by another of its kind (a digit
    by a digit, a hex letter by a hex letter; what follows a '%' is kept), so libpq reads
    both alike: whatever relay prints of one it must print of the other."""
    out = []
    for i, c in enumerate(pw):
        if "%" in pw[max(i - 2, 0) : i]:  # (a percent-encoded byte stays what it is)
            out.append(c)
            continue
        for kind in ("0123456789", "abcdef", "ABCDEF", "ghijklmnopqrstuvwxyz"):
            for k in (kind, kind.upper()):
                if c in k:
                    c = k[(k.index(c) + 3) % len(k)]
                    break
            else:
                continue
            break
        else:
            if c in MARKERS:
                c = MARKERS[(MARKERS.index(c) + 1) % len(MARKERS)]
        out.append(c)
    return "".join(out)


@pytest.mark.one_backend
@settings(max_examples=300, deadline=None)
@given(pw=any_password)
def test_nothing_relay_says_of_a_url_depends_on_its_password(pw):
    """For every URL form: what relay prints of the URL (and why it prints none) is the
    same for the password and for its twin, so it holds nothing of either; and the URL
    it prints is libpq's reading of the original without its secrets."""
    ext = _driver()
    from relay_cli.core.errors import RelayError
    from relay_cli.store.url import check, read, refusal, shown

    for url, other in zip(forms(pw, 5432), forms(twin(pw), 5432), strict=True):
        try:
            checked, checked_twin = check(url), check(other)
        except RelayError as e:  # a key=value string: refused by its (missing) scheme
            assert e.message.endswith("not (no scheme)")
            continue
        a, b = read(checked), read(checked_twin)
        assert (a.url, a.why, a.refused) == (b.url, b.why, b.refused), (url, a, b)
        assert shown(checked, "$X") == shown(checked_twin, "$X")
        err, err_twin = refusal(checked, "$X"), refusal(checked_twin, "$X")
        assert (err and (err.message, err.detail)) == (
            err_twin and (err_twin.message, err_twin.detail)
        )
        if a.url is not None:
            libpq = ext.parse_dsn(checked)
            assert ext.parse_dsn(a.url) == {k: v for k, v in libpq.items() if k not in a.secrets}
            assert set(a.secrets) == set(libpq) & {"password", "sslpassword"}


# ------------------------------------------------------------ every output, on a server
@pytest.fixture(scope="module")
def server():
    """A server on 127.0.0.1 that requires a password (scram), and its unix socket
    (trusted), with a database "relay" holding a request."""
    if pgserver.bindir() is None or not pgserver.driver_available():
        pytest.skip("PostgreSQL is not installed")
    s = pgserver.start(listen="127.0.0.1", password="initial")
    s.execute("CREATE DATABASE relay")
    try:
        relay = Relay(Path(tempfile.mkdtemp(prefix="relay-url-")) / "h", s.url("relay"))
        alice = relay.join("alice")
        relay.join("bob")
        assert relay.send(alice, "bob", "a request").code == 0
        yield s
    finally:
        s.remove()


# Passwords for the outputs: words joined by separators, each word of letters and digits
# with a marker at least every third character, so that every piece of three holds one
# (``leaked``), or a short number, which libpq may read as a port. The separators that
# end a part of a URL for libpq ('@', '/', ':', '?') are the likeliest.
_word = st.lists(
    st.tuples(st.text(string.ascii_letters + "0129", max_size=2), st.sampled_from(MARKERS)),
    min_size=1,
    max_size=3,
).map(lambda units: "".join(a + b for a, b in units)) | st.sampled_from(["1", "12", "2024"])
_separators = st.text(st.sampled_from("@@@///:::???#%&=,"), min_size=1, max_size=2)
marked_password = st.tuples(
    st.sampled_from(["", "@", "/", ":"]),
    _word,
    st.lists(st.tuples(_separators, _word).map("".join), max_size=3).map("".join),
    st.sampled_from(["", "@", "/", "&"]),
).map("".join)


def _hook_event() -> str:
    doc = json.loads((Path(__file__).parents[1] / "fixtures/claude/session_start.json").read_text())
    return json.dumps({**doc, "session_id": os.urandom(8).hex()})


def every_output(url: str, by_option: bool, env: dict[str, str], src_home: Path) -> list[str]:
    """Everything relay prints or writes for the database ``url``: stdout and stderr of
    each command, the hook's env file, the exported requests."""
    home = Path(tempfile.mkdtemp(prefix="relay-url-"))
    relay = Relay(home / "h", None if by_option else url)
    scope = ["--database-url", url] if by_option else []
    env_file = home / "claude-env.sh"
    env_file.touch()
    results = [
        relay("doctor", *scope, env=env),
        relay("doctor", "--json", *scope, env=env),
        relay("peers", "join", "carol", "--shell", *scope, env=env),
        relay("show", "0123abcd", "--json", *scope, env=env),
        relay("export", *scope, env=env),
        relay("db", "path", "--json", *scope, env=env),
        relay(
            "hook",
            "claude",
            *scope,
            input=_hook_event(),
            env={**env, "RELAY_PEER": "dave", "CLAUDE_ENV_FILE": str(env_file)},
        ),
        Relay(src_home, None)("db", "copy", "--to", url, "--json", env=env),
    ]
    for r in results:  # never a traceback or relay's own bug, whatever the URL
        assert "Traceback" not in r.err and '"internal_error"' not in r.err, r.err
    event(f"doctor exits {results[0].code}")  # (--hypothesis-show-statistics)
    return [text for r in results for text in (r.out, r.err)] + [env_file.read_text()]


@pytest.fixture(scope="module")
def src_home(server):
    """A local relay.db for `db copy --to URL` to read."""
    home = Path(tempfile.mkdtemp(prefix="relay-url-src-")) / "h"
    assert Relay(home)("peers", "add", "erin").code == 0
    return home


@pytest.mark.postgres_only
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    pw=marked_password,
    form=st.integers(0, len(forms("x", 1)) - 1),
    scenario=st.sampled_from(["up", "refuses", "wrong"]),
    by_option=st.booleans(),
)
def test_no_output_holds_a_piece_of_the_password(server, src_home, pw, form, scenario, by_option):
    """design.md §13, the fuzz: a random password in one URL form; the server up (the
    role's password is this one), refusing (nothing listens on the port) or up with
    another password; the URL given by $RELAY_DATABASE_URL or --database-url. No piece
    of three characters of the password is in anything relay prints or writes."""
    port = pgserver.free_port() if scenario == "refuses" else server.port
    server.execute(
        f"ALTER ROLE {pgserver.SUPERUSER} PASSWORD %s", (pw if scenario == "up" else "other",)
    )
    url = forms(pw, port, server.sock)[form]
    env = {"PGPASSFILE": "/nonexistent"}
    if "sslpassword=" in url:
        env["PGPASSWORD"] = pw  # (the login's password, from the environment)
    texts = every_output(url, by_option, env, src_home)
    found = {w for text in texts for w in leaked(text, pw)}
    assert not found, (url, found, [t for t in texts if any(w in t for w in found)])


@pytest.mark.postgres_only
@pytest.mark.parametrize(
    "pw,form,pieces",
    [
        ("Tö@ssw0rd:2024", 0, ["ssw0rd", "@2024", ":2024"]),  # libpq's host "ssw0rd"
        ("ab/cd?ef@λ", 4, ["cd?ef", "ef@", "@λ"]),  # libpq cannot read the query
        ("Zu%ж/x€&y", 1, ["Zu%", "/x€&y", "x€&"]),  # percent-encoded: it logs in
    ],
)
def test_no_output_of_the_real_process_holds_a_piece_of_the_password(server, pw, form, pieces):
    """The same through the real `relay` process (the console entry point, its own
    environment and streams): doctor, `peers join --shell`, the hook and its env file."""
    url = forms(pw, server.port, server.sock)[form]
    server.execute(f"ALTER ROLE {pgserver.SUPERUSER} PASSWORD %s", (pw,))
    home = Path(tempfile.mkdtemp(prefix="relay-url-"))
    relay = Relay(home / "h", url)
    env_file = home / "env.sh"
    env_file.touch()
    results = [
        relay.proc("doctor"),
        relay.proc("peers", "join", "frank", "--shell"),
        relay.proc(
            "hook",
            "claude",
            input=_hook_event(),
            env={"RELAY_PEER": "gina", "CLAUDE_ENV_FILE": str(env_file)},
        ),
    ]
    texts = [r.out + r.err for r in results] + [env_file.read_text()]
    assert not [p for t in texts for p in pieces if p in t], texts
    assert not [w for t in texts for w in leaked(t, pw)], texts
    if form == 1:  # a URL that logs in: it was used, and named as relay prints it
        shown = f"postgresql://{pgserver.SUPERUSER}@127.0.0.1:{server.port}/relay"
        assert results[0].code == 0 and shown in results[0].out, results[0].out
        assert f"export RELAY_DATABASE_URL={shlex.quote(shown)}" in results[1].out
        assert "RELAY_SESSION=" in texts[-1] and "RELAY_DATABASE_URL" not in texts[-1]


# ------------------------------------------------------------ what relay exports connects
def _exported(shell_out: str, var: str = "RELAY_DATABASE_URL", env: dict | None = None) -> str:
    return subprocess.run(
        ["bash", "-c", f'{shell_out}\nprintf %s "${var}"'],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout


@pytest.mark.postgres_only
@pytest.mark.parametrize("pw", ["Hash#Pw9", "pa?ss#x", "sp ace", "ünïcödé€", "x:y:z", "p%40ss"])
def test_the_exported_url_connects_with_the_password_from_pgpassword_or_pgpass(
    server, tmp_path, pw
):
    """`peers join --shell` exports the URL relay prints, without the password; libpq then
    finds it in PGPASSWORD or ~/.pgpass (here PGPASSFILE) and logs in, on the real
    server that requires it."""
    from urllib.parse import unquote

    login = unquote(pw)  # (what libpq reads from the URL's user information)
    server.execute(f"ALTER ROLE {pgserver.SUPERUSER} PASSWORD %s", (login,))
    url = f"postgresql://{pgserver.SUPERUSER}:{pw}@127.0.0.1:{server.port}/relay"
    relay = Relay(tmp_path / "h", url)
    shell = relay("peers", "join", "bob", "--shell")
    assert shell.code == 0 and pw not in shell.out + shell.err, shell.err
    exported = _exported(shell.out)
    assert exported == f"postgresql://{pgserver.SUPERUSER}@127.0.0.1:{server.port}/relay"
    again = Relay(tmp_path / "h", exported)
    no_password = again("peers", "list", "--json", env={"PGPASSFILE": "/nonexistent"})
    assert no_password.code == 7 and no_password.error["code"] == "storage_error"
    r = again("peers", "list", "--json", env={"PGPASSWORD": login})
    assert r.code == 0 and "bob" in r.out, r.err
    passfile = tmp_path / "pgpass"
    escaped = login.replace("\\", "\\\\").replace(":", "\\:")
    passfile.write_text(f"127.0.0.1:{server.port}:relay:{pgserver.SUPERUSER}:{escaped}\n")
    passfile.chmod(0o600)
    r = again("peers", "list", "--json", env={"PGPASSFILE": str(passfile)})
    assert r.code == 0 and "bob" in r.out, r.err


@pytest.mark.postgres_only
def test_the_unix_socket_url_is_exported_as_relay_prints_it_and_connects(server, tmp_path):
    url = (
        f"postgresql:///relay?host={quote(str(server.sock), safe='')}"
        f"&port={server.port}&user={pgserver.SUPERUSER}"
    )
    relay = Relay(tmp_path / "h", url)
    shell = relay("peers", "join", "bob", "--shell")
    assert shell.code == 0, shell.err
    exported = _exported(shell.out)
    assert exported == (
        f"postgresql://{pgserver.SUPERUSER}@/relay?host={server.sock}&port={server.port}"
    )
    r = Relay(tmp_path / "h", exported)("peers", "list", "--json")
    assert r.code == 0 and "bob" in r.out, r.err


@pytest.mark.postgres_only
def test_the_hook_env_file_holds_no_password_and_the_agents_shell_logs_in(server, tmp_path):
    """design.md §13: the env file never holds the password. A URL with a password that
    came from $RELAY_DATABASE_URL is left to the agent's shells, which inherit it from the
    runtime as the hook did; one given by --database-url is written as relay prints it,
    and logs in with PGPASSWORD."""
    from test_hook_runtimes import Agent

    pw = "Hash#Pw9€"
    server.execute(f"ALTER ROLE {pgserver.SUPERUSER} PASSWORD %s", (pw,))
    url = f"postgresql://{pgserver.SUPERUSER}:{quote(pw)}@127.0.0.1:{server.port}/relay"
    printed = f"postgresql://{pgserver.SUPERUSER}@127.0.0.1:{server.port}/relay"
    relay = Relay(tmp_path / "h", url)
    agent = Agent(relay, tmp_path, "claude")
    agent.hook("SessionStart")
    text = agent.env_file.read_text()
    assert "RELAY_SESSION=" in text and "RELAY_DATABASE_URL" not in text
    assert not [w for w in windows(pw) if w in text]
    inherited = {"PATH": os.environ["PATH"], "RELAY_DATABASE_URL": url}
    assert _exported(f'. "{agent.env_file}"', env=inherited) == url  # the agent's shell

    by_option = Relay(tmp_path / "h", None)
    env_file = tmp_path / "by-option-env.sh"
    env_file.touch()
    r = by_option(
        "hook",
        "claude",
        "--database-url",
        url,
        input=_hook_event(),
        env={"RELAY_PEER": "hank", "CLAUDE_ENV_FILE": str(env_file)},
    )
    assert r.code == 0, r.err
    text = env_file.read_text()
    assert f"export RELAY_DATABASE_URL={shlex.quote(printed)}" in text
    assert not [w for w in windows(pw) if w in text]
    exported = _exported(f'. "{env_file}"', env={"PATH": os.environ["PATH"]})
    r = Relay(tmp_path / "h", exported)("peers", "list", "--json", env={"PGPASSWORD": pw})
    assert r.code == 0 and "hank" in r.out, r.err


@pytest.mark.one_backend
def test_the_database_url_option_says_a_command_line_is_visible_in_ps(relay):
    for args in (("--help",), ("send", "--help"), ("peers", "join", "--help")):
        r = relay(*args)
        text = " ".join(r.out.replace("│", " ").split())
        assert r.code == 0 and "--database-url" in text
        assert "visible to every user in ps" in text and "~/.pgpass" in text, args
        assert "RELAY_DATABASE_URL" in text


@pytest.mark.postgres_only
def test_tls_is_libpqs_without_pythons_ssl_module(server, tmp_path):
    """design.md §13: relay keeps Python's ssl module out of the driver's import; libpq
    still makes the TLS connection the URL asks for."""
    import shutil
    import sys

    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make a certificate")
    key, crt = server.data / "server.key", server.data / "server.crt"
    subprocess.run(
        [
            "openssl",
            "req",
            "-new",
            "-x509",
            "-days",
            "2",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(crt),
        ],
        check=True,
        capture_output=True,
    )
    if server.user is not None:
        for f in (key, crt):
            os.chown(f, server.user.pw_uid, server.user.pw_gid)
    key.chmod(0o600)
    with open(server.data / "postgresql.conf", "a") as f:
        f.write("ssl = on\n")
    server.execute("SELECT pg_reload_conf()")
    server.execute(f"ALTER ROLE {pgserver.SUPERUSER} PASSWORD 'tls-test'")
    url = (
        f"postgresql://{pgserver.SUPERUSER}:tls-test@127.0.0.1:{server.port}/relay?sslmode=require"
    )
    code = (
        "import sys, json\nfrom relay_cli.cli import run\nrc = run(['doctor', '--json'])\n"
        "print(json.dumps('ssl' in sys.modules), file=sys.stderr)\nsys.exit(rc)"
    )
    p = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "RELAY_HOME": str(tmp_path / "h"), "RELAY_DATABASE_URL": url},
        timeout=60,
    )
    doc = json.loads(p.stdout)
    tls = [c for c in doc["checks"] if c["name"] == "tls"]
    assert tls and tls[0]["status"] == "ok" and "TLS in use" in tls[0]["detail"], doc
    assert p.stderr.strip().splitlines()[-1] == "false"  # ssl was never imported
