"""The wheel carries the package, the completions and the man page, and installs cleanly.

Builds with `python -m build` (sdist, then the wheel from the sdist) and installs the
wheel into a fresh virtual environment. Takes 20-40 s, so it runs only when
RELAY_SLOW_TESTS=1 (.ci/run sets it): `RELAY_SLOW_TESTS=1 python -m pytest tests/project/test_wheel.py`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    os.environ.get("RELAY_SLOW_TESTS") != "1", reason="slow (20-40 s): set RELAY_SLOW_TESTS=1"
)

SHARED = {
    "share/man/man1/relay.1": "man/relay.1",
    "share/bash-completion/completions/relay": "completions/relay.bash",
    "share/zsh/site-functions/_relay": "completions/_relay",
    "share/fish/vendor_completions.d/relay.fish": "completions/relay.fish",
}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    # build/__main__, not build: pip leaves a build/ directory in the checkout, which
    # Python takes for a namespace package named build when the real one is missing.
    pytest.importorskip("build.__main__", reason="a dev tool: pip install '.[dev]'")
    out = tmp_path_factory.mktemp("dist")
    p = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=out,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    wheels = list(out.glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_contains_the_package_completions_and_man_page(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        data = next(n.split("/", 1)[0] for n in names if ".data/" in n)
        for share, source in SHARED.items():
            member = f"{data}/data/{share}"
            assert member in names, member
            assert z.read(member) == (ROOT / source).read_bytes(), member
    modules = {str(p.relative_to(ROOT)) for p in (ROOT / "relay_cli").rglob("*.py")}
    tracked = subprocess.run(
        ["git", "ls-files", "relay_cli"], capture_output=True, text=True, cwd=ROOT
    ).stdout.split()
    for module in tracked or modules:
        if module.endswith(".py"):
            assert module in names, module
    # `relay web`'s page is package data, served as it is (design.md §17)
    static = ROOT / "relay_cli" / "operate" / "web" / "static"
    pages = sorted(p.name for p in static.iterdir() if not p.name.startswith("."))
    assert pages == ["app.css", "app.js", "icon.svg", "index.html"]
    with zipfile.ZipFile(wheel) as z:
        for page in pages:
            member = f"relay_cli/operate/web/static/{page}"
            assert z.read(member) == (static / page).read_bytes(), member
    assert any(n.endswith(".dist-info/entry_points.txt") for n in names)


def test_wheel_installs_in_a_fresh_venv_with_relay_and_share_files(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    pip = subprocess.run(
        [
            str(env_dir / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    p = subprocess.run(
        [str(env_dir / "bin" / "relay"), "--version"], capture_output=True, text=True
    )
    assert p.returncode == 0 and p.stdout.startswith("relay "), p.stderr
    # the installed package finds its page (package data, design.md §17)
    code = "from relay_cli.operate.web.server import page_files; print(sorted(page_files()))"
    p = subprocess.run(
        [str(env_dir / "bin" / "python"), "-c", code], capture_output=True, text=True, cwd=tmp_path
    )
    assert p.stdout.strip() == "['app.css', 'app.js', 'icon.svg', 'index.html']", p.stderr
    for share in SHARED:
        assert (env_dir / share).is_file(), share
