"""Packaging (design.md §15): one version source, honest dependency floors, and a source
distribution a packager can run the tests from."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import lowest_constraints  # noqa: E402


@pytest.mark.one_backend
def test_one_version_source_ties_the_package_metadata_and_relay_version(relay):
    import relay_cli

    pyproject = (ROOT / "pyproject.toml").read_text()
    project = pyproject.split("\n[project]\n", 1)[1].split("\n[", 1)[0]
    assert re.search(r'^dynamic = \["version"\]$', project, re.M)
    assert not re.search(r"^version\s*=", project, re.M)  # no second copy
    assert 'version = {attr = "relay_cli.__version__"}' in pyproject
    assert importlib.metadata.version("relay-cli") == relay_cli.__version__
    assert relay("--version").out == f"relay {relay_cli.__version__}\n"
    assert relay("schema").json["version"] == relay_cli.__version__


def test_every_runtime_dependency_declares_a_floor_and_the_constraints_pin_it():
    floors = lowest_constraints.floors(lowest_constraints.dependencies())
    assert set(floors) == {"typer", "rich", "sqlite-utils", "platformdirs"}
    assert floors["typer"] == "0.26"  # the first Typer that bundles its Click
    p = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "lowest_constraints.py")],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0 and p.stdout.splitlines() == [f"{n}=={v}" for n, v in floors.items()]
    typer_req = next(r for r in importlib.metadata.requires("relay-cli") if r.startswith("typer"))
    assert "<0.29" in typer_req  # 0.29 made pydantic a start-up import


def test_a_dependency_without_a_floor_is_an_error():
    with pytest.raises(SystemExit, match="declare exactly one floor"):
        lowest_constraints.floors(["rich"])
    with pytest.raises(SystemExit, match="declare exactly one floor"):
        lowest_constraints.floors(["typer<0.29"])
    assert lowest_constraints.floors(["a-b[x] >= 1.2 , <2; python_version>'3'"]) == {"a-b": "1.2"}


def _imported(path: Path) -> set[str]:
    import ast

    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return names


def test_the_tests_take_their_servers_from_testsupport_not_from_bench():
    # bench/ is a dev tool; what the suite runs relay against (the throwaway PostgreSQL
    # server, network namespaces) is testsupport/, which bench/ uses too
    assert not any(n.startswith("bench") for n in _imported(ROOT / "tests" / "conftest.py"))
    harness = {"bench.pgserver", "bench.netns"}
    uses = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for name in _imported(path) & harness
    }
    assert uses == set()
    assert not (ROOT / "bench" / "pgserver.py").exists()
    for path in sorted((ROOT / "testsupport").glob("*.py")):  # below both, imports neither
        assert not any(n.startswith(("bench", "tests", "conftest")) for n in _imported(path))
    # and it is not part of relay: the wheel holds relay_cli only
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'include = ["relay_cli*"]' in pyproject
    assert "graft testsupport" in (ROOT / "MANIFEST.in").read_text()


def test_the_user_visible_test_extra_holds_no_dev_tools():
    extras = {}
    for req in importlib.metadata.requires("relay-cli"):
        m = re.search(r'extra == "(\w+)"', req)
        if m:
            extras.setdefault(m.group(1), []).append(re.split(r"[<>=;\s\[]", req)[0])
    assert sorted(extras["test"]) == ["bpe-openai", "hypothesis", "pytest", "pytest-xdist"]
    assert sorted(extras["dev"]) == ["build", "mypy", "ruff", "types-psycopg2"]


def test_classifiers_say_linux_console_and_the_pythons_relay_runs_on():
    meta = importlib.metadata.metadata("relay-cli")
    classifiers = meta.get_all("Classifier")
    assert "Operating System :: POSIX :: Linux" in classifiers
    assert "Environment :: Console" in classifiers
    pythons = {
        c.rsplit(" ", 1)[1]
        for c in classifiers
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    }
    assert f"{sys.version_info.major}.{sys.version_info.minor}" in pythons
    assert meta["Requires-Python"] == ">=3.10" and "3.10" in pythons
    assert meta["Keywords"]


# ------------------------------------------------------------------ the sdist (slow)
slow = pytest.mark.skipif(
    os.environ.get("RELAY_SLOW_TESTS") != "1", reason="slow (about 40 s): set RELAY_SLOW_TESTS=1"
)


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> Path:
    # build/__main__, not build: pip leaves a build/ directory in the checkout, which
    # Python takes for a namespace package named build when the real one is missing.
    pytest.importorskip("build.__main__", reason="a dev tool: pip install '.[dev]'")
    out = tmp_path_factory.mktemp("sdist")
    p = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=out,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    (tarball,) = out.glob("*.tar.gz")
    return tarball


@slow
def test_sdist_holds_every_tracked_file_a_packager_needs(sdist):
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    tracked = subprocess.run(
        ["git", "ls-files"], capture_output=True, text=True, cwd=ROOT
    ).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    needed = [f for f in tracked if not f.startswith((".ci/", ".gitignore"))]
    assert [f for f in needed if f not in names] == []
    for required in (
        "tests/conftest.py",
        "tests/fixtures/README.md",
        "scripts/generate.py",
        "docs/design.md",
        "bench/startup.py",
        "testsupport/pgserver.py",
        "man/relay.1",
        "MANIFEST.in",
    ):
        assert required in names, required
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


@slow
def test_the_tests_run_from_the_unpacked_sdist(sdist, tmp_path):
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path, filter="data") if sys.version_info >= (3, 12) else tar.extractall(
            tmp_path
        )
    (src,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_")}
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/requests/test_full_cycle.py",
            "tests/project/test_design_citations.py",
            "tests/agents/test_hook_runtimes.py",
            "tests/project/test_generated.py::test_generated_files_match_a_fresh_generation",
        ],
        cwd=src,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    # the relay these tests ran is the sdist's own copy
    p = subprocess.run(
        [sys.executable, "-c", "import relay_cli; print(relay_cli.__file__)"],
        cwd=src,
        capture_output=True,
        text=True,
    )
    assert p.stdout.strip() == str(src / "relay_cli" / "__init__.py")
