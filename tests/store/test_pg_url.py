"""The database URL as libpq reads it (design.md §13): a password is never shown, however
it is written, and every URL relay exports connects exactly as the original did."""

from __future__ import annotations

import json
import os
import re
import subprocess
from urllib.parse import quote

import pytest
from conftest import Relay

from relay_cli.store.url import password_of, redact, scrub, secrets_of, without_password
from testsupport import pgserver

# Passwords a person may paste into a URL without percent-encoding them.
HOSTILE = [
    "Hash#Pw9",
    "pa?ss#x",
    "p@ss",
    "pa/ss",
    "50%off",
    "sp ace",
    "ünïcödé€",
    "x:y:z",
    "a&password=b",
    "?password=q",
    # an '@' followed by a '/' or '?': libpq ends the password at the first '@'
    "Xk9@Lm2/Qr7",
    "Xk9@Lm2?Qr7",
    "Xk9/Lm2@Qr7",
    "7319/8462",
    "Xk9@Lm2/Qr7?Zy5@Wv3",
]
# passwords whose every piece of three characters or more must be shown nowhere
SPLIT = ["Xk9@Lm2/Qr7", "Xk9@Lm2?Qr7", "Xk9/Lm2@Qr7", "7319/8462", "Xk9@Lm2/Qr7?Zy5@Wv3"]


def _forms(secret: str) -> list[str]:
    return [secret, quote(secret, safe=""), quote(secret)]


def _urls(pw: str, port: int = 55432) -> list[str]:
    return [
        f"postgresql://u:{pw}@127.0.0.1:{port}/db",
        f"postgres://u:{pw}@/db?host=/run/pg",
        f"postgresql://u:{pw}@h1:{port},h2:{port}/db?sslmode=require",
        f"postgresql://u@127.0.0.1:{port}/db?password={pw}",
        f"postgresql://u@127.0.0.1:{port}/db?sslmode=require&password={pw}&x=1",
        f"postgresql://u@127.0.0.1:{port}/db?sslpassword={pw}",
    ]


@pytest.mark.one_backend
@pytest.mark.parametrize("pw", HOSTILE)
def test_no_form_of_a_hostile_password_survives_redaction(pw):
    for url in _urls(pw):
        shown = redact(url)
        assert not any(f in shown for f in _forms(pw)), (url, shown)
        message = f"could not connect to {url}: password {pw!r} for {quote(pw)} refused"
        assert not any(f in scrub(message, url) for f in _forms(pw)), (url, scrub(message, url))


def _pieces(pw: str) -> list[str]:
    return [p for p in re.split(r"[@/?]", pw) if len(p) >= 3]


@pytest.mark.one_backend
@pytest.mark.parametrize("pw", SPLIT)
def test_no_piece_of_a_password_cut_by_libpq_survives_redaction(pw):
    """libpq ends ``u:Xk9@Lm2/Qr7@host`` at the first '@' (the host "Lm2", the database
    "Qr7@host"): what follows it is still the person's password, and shown nowhere."""
    for url in _urls(pw) + [f"postgresql://u:{pw}@host:5432/db?user=me@corp"]:
        shown = redact(url)
        assert not any(p in shown for p in _pieces(pw)), (url, shown)
        assert shown.startswith("postgresql://u") or shown.startswith("postgres://u")
        message = f'could not translate host name "Lm2" to address; database "{url}"'
        assert not any(p in scrub(message, url) for p in _pieces(pw)), scrub(message, url)


@pytest.mark.one_backend
@pytest.mark.parametrize("pw", HOSTILE + ["plain", "pct%23encoded"])
def test_the_password_is_what_libpq_takes_and_the_rest_connects_the_same(pw):
    """libpq itself (the driver's parse_dsn) is the judge of what a URL means."""
    if not pgserver.driver_available():
        pytest.skip("the PostgreSQL driver is not installed")
    from psycopg2.extensions import parse_dsn

    for url in _urls(pw):
        try:
            libpq = parse_dsn(url)
        except Exception:  # noqa: BLE001 - libpq refuses it: nothing can connect with it
            continue
        secrets = {k: libpq.pop(k) for k in ("password", "sslpassword") if k in libpq}
        assert password_of(url) == secrets.get("password")
        assert parse_dsn(without_password(url)) == libpq, url
        if redact(url) != without_password(url):
            # shown with less of it: only a URL whose host or port libpq cannot use
            ports = libpq.get("port", "").replace(",", "")
            misread = any("@" in libpq.get(k, "") for k in ("host", "dbname"))
            assert misread or not ports.isdigit(), url
        else:
            assert parse_dsn(redact(url)) == libpq, url
        for value in secrets.values():
            assert value in secrets_of(url) or len(value) < 3  # (then only where quoted)


@pytest.mark.one_backend
def test_a_url_without_a_password_is_kept_byte_for_byte():
    for url in (
        "postgresql:///relay?host=/run/postgresql",
        "postgresql://",
        "postgres://@/db?host=%2Ftmp&port=5433",
        "postgresql://[::1]:5432/db#x",
        "postgresql://h/db?application_name=a%20b&options=-c%20x%3Dy",
        "postgresql://h:5432/db?user=me@corp",
    ):
        assert without_password(url) == url and redact(url) == url


@pytest.mark.one_backend
def test_a_conninfo_string_or_another_scheme_is_refused_without_showing_it(relay):
    for value in ("host=h password=Hash#Pw9 dbname=a://b", "mysql://u:Hash#Pw9@h/db"):
        r = relay("list", "--json", "--database-url", value)
        assert (r.code, r.error["code"]) == (2, "usage_error")
        assert "Hash#Pw9" not in r.out + r.err and "Hash" not in r.out + r.err


# ------------------------------------------------------------------ against a server
@pytest.fixture(scope="module")
def server():
    """A server on 127.0.0.1 that requires a password (scram), and its unix socket."""
    if pgserver.bindir() is None or not pgserver.driver_available():
        pytest.skip("PostgreSQL is not installed")
    s = pgserver.start(listen="127.0.0.1", password="initial")
    s.execute("CREATE DATABASE relay")
    try:
        yield s
    finally:
        s.remove()


def _leaks(text: str, pw: str) -> bool:
    return any(f in text for f in _forms(pw)) or any(p in text for p in _pieces(pw))


@pytest.mark.postgres_only
@pytest.mark.parametrize("pw", ["Hash#Pw9", "pa?ss#x", "sp ace", "ünïcödé€", "x:y:z"])
def test_an_unencoded_password_is_shown_nowhere_and_the_export_connects(server, tmp_path, pw):
    server.execute(f"ALTER ROLE {pgserver.SUPERUSER} PASSWORD %s", (pw,))
    url = f"postgresql://{pgserver.SUPERUSER}:{pw}@127.0.0.1:{server.port}/relay"
    relay = Relay(tmp_path / "h", url)
    results = [relay("peers", "join", "alice", "--json")]
    alice = {"RELAY_PEER": "alice", "RELAY_SESSION": results[0].json["token"]}
    shell = relay("peers", "join", "bob", "--shell")
    results += [
        shell,
        relay("doctor"),
        relay("doctor", "--json"),
        relay("send", "--to", "nobody", "x", env=alice),
        relay(
            "list",
            "--json",
            env={
                "RELAY_DATABASE_URL": url.replace(f":{server.port}/", f":{pgserver.free_port()}/")
            },
        ),  # nothing listens
        relay(
            "list", "--json", env={"RELAY_DATABASE_URL": url.replace("@127.0.0.1", "@127.0.0.1:1")}
        ),  # two ports
        relay("list", "--json", env={"RELAY_DATABASE_URL": url.replace(pw, pw + "wrong")}),
    ]
    assert results[0].code == 0 and shell.code == 0 and results[2].code == 0, results[2].out
    assert not [r for r in results if _leaks(r.out + r.err, pw)], [
        r.out + r.err for r in results if _leaks(r.out + r.err, pw)
    ]
    exported = subprocess.run(
        ["bash", "-c", f'{shell.out}\nprintf %s "$RELAY_DATABASE_URL"'],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert exported == f"postgresql://{pgserver.SUPERUSER}@127.0.0.1:{server.port}/relay"
    # it connects as the original did, with the password from PGPASSWORD (or ~/.pgpass)
    r = Relay(tmp_path / "h", exported)("peers", "list", "--json", env={"PGPASSWORD": pw})
    assert r.code == 0, r.err


@pytest.mark.postgres_only
@pytest.mark.parametrize("pw", ["p@ss", "pa/ss", "50%off", "a&b", *SPLIT])
def test_a_password_libpq_cannot_read_is_shown_nowhere(server, tmp_path, pw):
    for url in (
        f"postgresql://{pgserver.SUPERUSER}:{pw}@127.0.0.1:{server.port}/relay",
        f"postgresql://{pgserver.SUPERUSER}@127.0.0.1:{server.port}/relay?password={pw}",
    ):
        relay = Relay(tmp_path / "h", url)
        for r in (relay("list", "--json"), relay("doctor"), relay("doctor", "--json")):
            assert r.code != 0
            assert not _leaks(r.out + r.err, pw), r.out + r.err


def _unix_url(server, dbname: str = "relay") -> str:
    """The standard unix-socket URL: no host before the path, the directory as host=."""
    return (
        f"postgresql:///{dbname}?host={quote(str(server.sock), safe='/')}"
        f"&port={server.port}&user={pgserver.SUPERUSER}"
    )


@pytest.mark.postgres_only
def test_the_unix_socket_url_is_exported_as_it_is_and_connects(server, tmp_path):
    url = _unix_url(server)
    relay = Relay(tmp_path / "h", url)
    shell = relay("peers", "join", "bob", "--shell")
    assert shell.code == 0, shell.err
    exported = subprocess.run(
        ["bash", "-c", f'{shell.out}\nprintf %s "$RELAY_DATABASE_URL"'],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert exported == url
    r = Relay(tmp_path / "h", exported)("peers", "list", "--json")
    assert r.code == 0 and "bob" in r.out, r.err


@pytest.mark.postgres_only
@pytest.mark.parametrize("mode", [0o600, 0o644])
def test_the_hook_env_file_carries_a_url_that_logs_in(server, tmp_path, mode):
    """design.md §13: a private env file (like the session token it holds) gets the URL
    as relay was given it, password included, so the agent's shell logs in; a file
    others can read gets it without the password (use ~/.pgpass or PGPASSWORD)."""
    from test_hook_runtimes import Agent

    pw = "Hash#Pw9"
    server.execute(f"ALTER ROLE {pgserver.SUPERUSER} PASSWORD %s", (pw,))
    url = f"postgresql://{pgserver.SUPERUSER}:{pw}@127.0.0.1:{server.port}/relay"
    relay = Relay(tmp_path / "h", url)
    agent = Agent(relay, tmp_path, "claude")
    os.chmod(agent.env_file, mode)
    agent.hook("SessionStart")
    exported = subprocess.run(
        ["bash", "-c", f'. "{agent.env_file}"; printf %s "$RELAY_DATABASE_URL"'],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": os.environ["PATH"]},
    ).stdout
    if mode == 0o600:
        assert exported == url
        r = Relay(tmp_path / "h", exported)("peers", "list", "--json", env={"PGPASSWORD": None})
    else:
        assert exported == without_password(url) and pw not in agent.env_file.read_text()
        r = Relay(tmp_path / "h", exported)("peers", "list", "--json", env={"PGPASSWORD": pw})
    assert r.code == 0, r.err


@pytest.mark.one_backend
def test_the_database_url_option_says_a_command_line_is_visible_in_ps(relay):
    for args in (("--help",), ("send", "--help"), ("peers", "join", "--help")):
        r = relay(*args)
        text = " ".join(r.out.replace("│", " ").split())
        assert r.code == 0 and "--database-url" in text
        assert "visible to every user in ps" in text and "~/.pgpass" in text, args
        assert "RELAY_DATABASE_URL" in text


@pytest.mark.postgres_only
@pytest.mark.parametrize("pw", HOSTILE)
def test_no_error_message_shows_a_hostile_password(relay, pw):
    """Nothing listens on port 1: each URL fails in libpq's parser or at connecting."""
    for url in _urls(pw, port=1) + [f"POSTGRESQL://u:{pw}@127.0.0.1:1/db"]:
        r = relay("list", "--json", env={"RELAY_DATABASE_URL": url})
        assert r.code != 0 and r.error["code"] != "internal_error", r.err
        assert not _leaks(r.out + r.err, pw), (url, r.err)


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
