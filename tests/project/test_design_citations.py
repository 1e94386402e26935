"""The repository explains itself: every `design.md §N` cited in code, tests, docs, bench
and scripts names a section that docs/design.md has, and nothing cites a document that
lives outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
WHERE = ("relay_cli", "tests", "testsupport", "docs", "bench", "scripts", "README.md")
CITE = re.compile(r"design(?:\.md)? §(\d+)((?:(?:, ?|/| ?\+ ?|–)§\d+)*)")
OUTSIDE = re.compile(r"SPEC ?§|SPEC\.md|\bissues? \d+", re.IGNORECASE)


def _files():
    for name in WHERE:
        path = ROOT / name
        if path.is_file():
            yield path
        elif path.is_dir():
            for f in sorted(path.rglob("*")):
                if f.suffix in (".py", ".md", ".sh", ".toml") and "__pycache__" not in f.parts:
                    yield f


def _sections() -> set[int]:
    return {int(m) for m in re.findall(r"^## §(\d+) ", DESIGN.read_text(), re.M)}


def test_every_cited_design_section_exists():
    sections = _sections()
    assert sections, "docs/design.md has no numbered sections"
    missing = []
    for f in _files():
        for m in CITE.finditer(f.read_text(errors="replace")):
            cited = [int(m.group(1))] + [int(n) for n in re.findall(r"§(\d+)", m.group(2))]
            missing += [f"{f.relative_to(ROOT)}: §{n}" for n in cited if n not in sections]
    assert missing == []


def test_nothing_cites_documents_outside_the_repository():
    this = Path(__file__).resolve()
    found = [
        f"{f.relative_to(ROOT)}:{i}"
        for f in _files()
        if f.resolve() != this
        for i, line in enumerate(f.read_text(errors="replace").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert found == []


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)\s]*)?\)")


def test_every_relative_link_in_the_docs_names_a_file_that_exists():
    """A Markdown link in README.md or docs/ is relative to the file that holds it."""
    broken = []
    for f in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for m in LINK.finditer(f.read_text()):
            target = m.group(1)
            if (
                "://" not in target
                and not target.startswith("mailto:")
                and not (f.parent / target).exists()
            ):
                broken.append(f"{f.relative_to(ROOT)}: {target}")
    assert broken == []
