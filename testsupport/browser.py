"""A real browser for the tests and the benchmarks (design.md §17): Debian's ``chromium``,
headless, driven over WebDriver by its ``chromedriver`` with nothing but the standard
library's HTTP client (no Selenium).

The browser runs with a fresh profile in a temporary directory and reaches nothing but
this machine: every host name resolves to nothing (``--host-resolver-rules``) except the
loopback address and ``REBIND_HOST``, which resolves to 127.0.0.1 as an attacker's DNS name
would in a DNS-rebinding attack. Background networking, updates, sync and QUIC are off.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from .pgserver import free_port

# A name that points at 127.0.0.1 the way a hostile DNS answer would (DNS rebinding).
REBIND_HOST = "rebind.test"


def programs() -> tuple[str, str] | None:
    """(chromium, chromedriver), or None when either is not installed."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def missing() -> str | None:
    """Why there is no browser to test with, or None."""
    if programs() is None:
        return "Debian's chromium and chromium-driver are not installed"
    return None


class WebDriverError(Exception):
    pass


class Browser:
    """One headless chromium (one WebDriver session) until ``close()``."""

    def __init__(self, width: int = 1280, height: int = 800) -> None:
        found = programs()
        if found is None:
            raise WebDriverError(missing())
        chromium, chromedriver = found
        self.dir = Path(tempfile.mkdtemp(prefix="relay-browser-"))
        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        self.driver = subprocess.Popen(
            [chromedriver, f"--port={port}", "--allowed-ips=127.0.0.1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.session = ""
        try:
            self._await_driver()
            args = [
                "--headless=new",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--disable-default-apps",
                "--disable-quic",
                "--no-first-run",
                "--no-default-browser-check",
                "--hide-scrollbars",
                "--force-device-scale-factor=1",
                "--lang=en-US",
                f"--user-data-dir={self.dir / 'profile'}",
                f"--window-size={width},{height}",
                f"--host-resolver-rules=MAP {REBIND_HOST} 127.0.0.1, MAP * ~NOTFOUND, "
                "EXCLUDE 127.0.0.1, EXCLUDE localhost",
            ]
            if os.geteuid() == 0:
                args.append("--no-sandbox")  # chromium's sandbox refuses to run as root
            answer = self._call(
                "POST",
                "/session",
                {
                    "capabilities": {
                        "alwaysMatch": {
                            "browserName": "chrome",
                            "goog:chromeOptions": {"binary": chromium, "args": args},
                            "goog:loggingPrefs": {"browser": "ALL"},
                        }
                    }
                },
                timeout=60,
            )
            self.session = answer["sessionId"]
            self.viewport(width, height)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------- WebDriver
    def _await_driver(self) -> None:
        end = time.monotonic() + 20
        while time.monotonic() < end:
            try:
                if self._call("GET", "/status", timeout=2).get("ready"):
                    return
            except (OSError, WebDriverError):
                pass
            time.sleep(0.05)
        raise WebDriverError("chromedriver did not start")

    def _call(self, method: str, path: str, body: object = None, timeout: float = 30) -> dict:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as r:
                answer = json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            raise WebDriverError(e.read().decode(errors="replace")[:2000]) from None
        value = answer.get("value", answer)
        return value if isinstance(value, dict) else {"value": value}

    def _value(self, method: str, path: str, body: object, timeout: float):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.base}/session/{self.session}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as r:
                return json.loads(r.read() or b"{}").get("value")
        except urllib.error.HTTPError as e:
            raise WebDriverError(e.read().decode(errors="replace")[:2000]) from None

    # ------------------------------------------------------------- what tests use
    def go(self, url: str) -> None:
        self._value("POST", "/url", {"url": url}, 60)

    def run(self, script: str, *args: object):
        """Run ``script`` (a function body; ``arguments`` holds ``args``) in the page."""
        return self._value("POST", "/execute/sync", {"script": script, "args": list(args)}, 30)

    def wait_for(self, script: str, *args: object, timeout: float = 10, every: float = 0.01):
        """The first truthy value of ``script``, looked at every ``every`` seconds."""
        end = time.monotonic() + timeout
        while True:
            value = self.run(script, *args)
            if value or time.monotonic() > end:
                return value
            time.sleep(every)

    def cdp(self, command: str, params: dict | None = None):
        return self._value(
            "POST", "/goog/cdp/execute", {"cmd": command, "params": params or {}}, 30
        )

    def viewport(self, width: int, height: int) -> None:
        """The page's viewport exactly ``width`` x ``height`` CSS pixels (a phone's is a
        touch screen)."""
        self.cdp(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600},
        )

    def screenshot(self, path: Path, full_page: bool = False) -> bytes:
        params: dict = {"format": "png"}
        if full_page:
            size = self.run(
                "return [document.documentElement.scrollWidth,"
                " document.documentElement.scrollHeight]"
            )
            params |= {
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1},
            }
        png = base64.b64decode(self.cdp("Page.captureScreenshot", params)["data"])
        Path(path).write_bytes(png)
        return png

    def console(self) -> list[dict]:
        """What the page wrote to its console since the last call (CSP reports land here)."""
        return self._value("POST", "/se/log", {"type": "browser"}, 30) or []

    def close(self) -> None:
        if self.session:
            try:
                self._value("DELETE", "", None, 10)
            except (OSError, WebDriverError):
                pass
            self.session = ""
        if self.driver.poll() is None:
            self.driver.terminate()
            try:
                self.driver.wait(10)
            except subprocess.TimeoutExpired:
                self.driver.kill()
                self.driver.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class RelayWeb:
    """`relay web --no-open ARGS` in a real process (``python -m relay_cli``, with ``env``
    as its whole environment): ``url`` is the first line it printed; ``stop()`` ends it
    as Ctrl-C does and returns (exit status, the rest of stdout, stderr)."""

    def __init__(self, python: str, env: dict[str, str], *args: str, timeout: float = 30) -> None:
        import selectors
        import sys

        self.proc = subprocess.Popen(
            [python or sys.executable, "-m", "relay_cli", "web", "--no-open", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        ready = sel.select(timeout)
        sel.close()
        line = self.proc.stdout.readline().decode() if ready else ""
        if not line:
            self.proc.kill()
            out, err = self.proc.communicate()
            raise AssertionError(f"relay web printed no address: {out!r} {err!r}")
        self.url = line.strip()
        self.first_line = line
        self.port = int(self.url.split(":")[2].split("/")[0])
        self.token = self.url.split("?token=", 1)[1]
        self.base = f"http://127.0.0.1:{self.port}"

    def at(self, path: str, **query: str) -> str:
        """The URL of ``path`` with this run's token (and ``query``)."""
        from urllib.parse import urlencode

        return f"{self.base}{path}?{urlencode({'token': self.token, **query})}"

    def stop(self, sig: int | None = None, timeout: float = 10) -> tuple[int, str, str]:
        import signal

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT if sig is None else sig)
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")
