"""The tests show the parts (design.md §16): every test file lives in the folder of the
part of relay whose behaviour it checks -- one folder per subpackage of relay_cli, plus
e2e/ (the end-to-end harness and the real agent runtimes) and project/ (the repository's
own checks: docs, generated files, packaging, the architecture, the test harness).

pytest imports a test module by its file name (tests/ has no ``__init__.py``), so no two
test files share a name, and every folder is on pytest's ``pythonpath``: a test that takes
a helper from another part's test module finds it whichever tests run. And a test file
the repository names (docs, comments, .ci/run, the modules conftest.py schedules together)
is one that exists, so a moved file cannot leave a stale name behind.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
# what is not a part of the package but has tests of its own
BESIDE = ("e2e", "project")


def _parts() -> list[str]:
    return sorted(p.name for p in (ROOT / "relay_cli").iterdir() if (p / "__init__.py").is_file())


def _test_files() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def test_every_part_of_the_package_has_its_folder_of_tests_and_nothing_else_has_one():
    kept = ("fixtures", "__pycache__")  # tests/fixtures/: the runtimes' payloads and schemas
    folders = sorted(
        p.name for p in TESTS.iterdir() if p.is_dir() and p.name not in kept and p.name[0] != "."
    )
    assert folders == sorted([*_parts(), *BESIDE])


def test_every_test_file_lives_in_a_part_folder():
    homes = {*_parts(), *BESIDE}
    astray = [
        str(f.relative_to(TESTS))
        for f in _test_files()
        if len(f.relative_to(TESTS).parts) != 2 or f.parent.name not in homes
    ]
    assert astray == []
    for part in homes:
        assert list((TESTS / part).glob("test_*.py")), f"tests/{part}/ holds no test"


def test_no_two_test_files_share_a_name_and_no_folder_is_a_package():
    names = Counter(f.name for f in _test_files())
    assert [name for name, n in names.items() if n > 1] == []
    assert list(TESTS.rglob("__init__.py")) == []
    # and one conftest.py, whose fixtures every folder shares
    assert sorted(TESTS.rglob("conftest.py")) == [TESTS / "conftest.py"]


def test_every_part_folder_is_on_pytests_pythonpath():
    pyproject = (ROOT / "pyproject.toml").read_text()
    listed = re.search(r"^pythonpath = \[(.*?)\]", pyproject, re.M | re.S)
    assert listed, "pyproject.toml's [tool.pytest.ini_options] has no pythonpath"
    paths = re.findall(r'"([^"]+)"', listed.group(1))
    assert sorted(paths) == sorted(f"tests/{part}" for part in [*_parts(), *BESIDE])


# a test file the repository names by its path: docs, comments, .ci/run, scripts
NAMED = re.compile(r"\btests/(?:[\w-]+/)*test_\w+\.py")
WHERE = ("relay_cli", "tests", "testsupport", "docs", "bench", "scripts", "e2e")


def _texts():
    for name in WHERE:
        for f in sorted((ROOT / name).rglob("*")):
            if f.suffix in (".py", ".md", ".sh", ".toml") and "__pycache__" not in f.parts:
                yield f
    for name in ("README.md", "MANIFEST.in", "pyproject.toml", ".ci/run"):
        if (ROOT / name).is_file():
            yield ROOT / name


def test_every_test_file_the_repository_names_exists():
    missing = [
        f"{f.relative_to(ROOT)}: {m.group(0)}"
        for f in _texts()
        for m in NAMED.finditer(f.read_text(errors="replace"))
        if not (ROOT / m.group(0)).is_file()
    ]
    assert missing == []


def test_the_modules_conftest_schedules_together_exist():
    import conftest

    names = {f.name for f in _test_files()}
    listed = [
        prefix.split("::")[0] for prefixes in conftest.XDIST_GROUPS.values() for prefix in prefixes
    ] + list(conftest.SHARED_FIXTURE_MODULES)
    assert [name for name in listed if name not in names] == []
