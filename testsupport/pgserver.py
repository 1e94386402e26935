"""A throwaway PostgreSQL server for the tests and the benchmarks (design.md §13).

It uses the server programs of the machine (Debian's PostgreSQL 15 under
/usr/lib/postgresql/15/bin, or whatever ``pg_config --bindir`` names), runs them in a
temporary directory as an unprivileged user when we are root (PostgreSQL refuses to run
as root), listens on a unix socket in that directory (and on a TCP address when asked)
and is stopped and removed by ``stop()``. Nothing is mocked.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

SUPERUSER = "postgres"


def bindir() -> Path | None:
    """Where initdb, pg_ctl and postgres live, or None when PostgreSQL is not installed."""
    env = os.environ.get("RELAY_PG_BINDIR")
    candidates = [env] if env else []
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        candidates.append(out.stdout.strip())
    for c in candidates:
        if c and (Path(c) / "initdb").exists() and (Path(c) / "pg_ctl").exists():
            return Path(c)
    if shutil.which("initdb") and shutil.which("pg_ctl"):
        return Path(shutil.which("initdb")).parent
    return None


def driver_available() -> bool:
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class Server:
    """One PostgreSQL cluster in a temporary directory.

    ``listen`` is a TCP address to listen on besides the unix socket (``""``: none);
    ``netns`` runs the server inside that network namespace; ``password`` sets the
    superuser's password and requires it (scram) on TCP connections.
    """

    def __init__(
        self,
        listen: str = "",
        port: int | None = None,
        netns: str | None = None,
        password: str | None = None,
        fsync: bool = False,
    ) -> None:
        self.bin = bindir()
        if self.bin is None:
            raise RuntimeError("PostgreSQL's server programs (initdb, pg_ctl) are not installed")
        self.listen = listen
        self.port = port or free_port()
        self.netns = netns
        self.password = password
        self.fsync = fsync
        self.root = Path(tempfile.mkdtemp(prefix="relay-pg-"))
        self.data = self.root / "data"
        self.sock = self.root / "sock"
        self.log = self.root / "server.log"
        self.user = None
        if os.geteuid() == 0:
            import pwd

            self.user = pwd.getpwnam("nobody")
        self._admin = None

    # ------------------------------------------------------------------ processes
    def _run(self, argv: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
        extra = {}
        if self.netns:
            # entering a namespace needs root; the server itself then runs as nobody
            if self.user is not None:
                argv = [
                    "setpriv",
                    f"--reuid={self.user.pw_uid}",
                    f"--regid={self.user.pw_gid}",
                    "--clear-groups",
                    *argv,
                ]
            argv = ["ip", "netns", "exec", self.netns, *argv]
        elif self.user is not None:
            extra = {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        p = subprocess.run(
            argv, capture_output=True, text=True, env=env, cwd=self.root, **extra, **kw
        )
        if check and p.returncode != 0:
            raise RuntimeError(
                f"{' '.join(argv)} failed ({p.returncode}): {p.stderr[-2000:]}\n{self.log_tail()}"
            )
        return p

    def log_tail(self) -> str:
        try:
            return self.log.read_text()[-2000:]
        except OSError:
            return ""

    def init(self) -> Server:
        self.sock.mkdir()
        if self.user is not None:
            for p in (self.root, self.sock):
                os.chown(p, self.user.pw_uid, self.user.pw_gid)
        os.chmod(self.root, 0o755)  # the clients (root or not) reach the socket inside
        argv = [
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            SUPERUSER,
            "--auth-local=trust",
            "--auth-host=" + ("scram-sha-256" if self.password else "trust"),
            "-E",
            "UTF8",
            "--no-sync",
        ]
        pwfile = None
        if self.password:
            pwfile = self.root / "pw"
            pwfile.write_text(self.password + "\n")
            if self.user is not None:
                os.chown(pwfile, self.user.pw_uid, self.user.pw_gid)
            argv += ["--pwfile", str(pwfile)]
        self._run(argv)
        if pwfile:
            pwfile.unlink()
        conf = [
            f"port = {self.port}",
            f"listen_addresses = '{self.listen}'",
            f"unix_socket_directories = '{self.sock}'",
            "max_connections = 300",
            f"fsync = {'on' if self.fsync else 'off'}",
            f"full_page_writes = {'on' if self.fsync else 'off'}",
            "shared_buffers = 64MB",
            "log_min_messages = warning",
        ]
        with open(self.data / "postgresql.conf", "a") as f:
            f.write("\n".join(conf) + "\n")
        if self.listen:
            with open(self.data / "pg_hba.conf", "a") as f:
                method = "scram-sha-256" if self.password else "trust"
                f.write(f"host all all 0.0.0.0/0 {method}\n")
        return self

    def start(self) -> Server:
        self._run(
            [
                str(self.bin / "pg_ctl"),
                "-D",
                str(self.data),
                "-l",
                str(self.log),
                "-w",
                "-t",
                "60",
                "start",
            ]
        )
        return self

    def stop(self, mode: str = "fast") -> None:
        if self._admin is not None:
            try:
                self._admin.close()
            except Exception:  # noqa: BLE001 - the server may be gone already
                pass
            self._admin = None
        if (self.data / "postmaster.pid").exists():
            self._run(
                [
                    str(self.bin / "pg_ctl"),
                    "-D",
                    str(self.data),
                    "-m",
                    mode,
                    "-w",
                    "-t",
                    "60",
                    "stop",
                ],
                check=False,
            )

    def kill(self) -> None:
        """SIGKILL the postmaster (a crash: no shutdown checkpoint)."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
            os.kill(pid, 9)
        except (OSError, ValueError):
            pass
        self._admin = None

    def remove(self) -> None:
        self.stop(mode="immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    # ------------------------------------------------------------------ clients
    def url(self, dbname: str = "postgres", host: str | None = None, password: bool = False) -> str:
        """A libpq URL for ``dbname``: over the unix socket, or TCP to ``host``."""
        auth = SUPERUSER
        if password and self.password:
            auth += ":" + quote(self.password, safe="")
        if host is None:
            return (
                f"postgresql://{auth}@/{dbname}?host={quote(str(self.sock), safe='')}"
                f"&port={self.port}"
            )
        return f"postgresql://{auth}@{host}:{self.port}/{dbname}"

    def admin(self):
        """An autocommit superuser connection to the ``postgres`` database (socket)."""
        import psycopg2

        if self._admin is None or self._admin.closed:
            self._admin = psycopg2.connect(self.url())
            self._admin.autocommit = True
        return self._admin

    def execute(self, sql: str, params=None, dbname: str | None = None):
        import psycopg2

        if dbname is None:
            conn = self.admin()
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall() if cur.description else None
        conn = psycopg2.connect(self.url(dbname))
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall() if cur.description else None
        finally:
            conn.close()

    def create_db(self, name: str, template: str | None = None) -> str:
        tmpl = f" TEMPLATE {template}" if template else ""
        self.execute(f'CREATE DATABASE "{name}"{tmpl}')
        return self.url(name)

    def drop_db(self, name: str) -> None:
        self.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def wait_ready(self, timeout: float = 30) -> None:
        end = time.monotonic() + timeout
        while True:
            try:
                self.execute("SELECT 1")
                return
            except Exception:  # noqa: BLE001
                self._admin = None
                if time.monotonic() > end:
                    raise
                time.sleep(0.1)


def start(**kw) -> Server:
    return Server(**kw).init().start()
