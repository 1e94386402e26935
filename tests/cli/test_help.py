"""Help for a person (design.md §14): every command shows examples that Click prints as
written (so a copied line runs), and `relay --help` groups the commands with whole
summaries at 80 columns."""

from __future__ import annotations

import re
import shlex
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import generate  # noqa: E402  (scripts/generate.py: help at 80 columns, as the docs show it)

from relay_cli.cli import schema  # noqa: E402
from relay_cli.cli.app import SECTIONS  # noqa: E402


def leaf_commands() -> list[dict]:
    return [c for c in schema.build()["commands"] if not c["group"]]


# every leaf command's schema, read once per test process (the tests only read it:
# building the whole tree is ~0.1 s of CPU, once for each of the ~100 tests otherwise)
LEAF = {c["path"]: c for c in leaf_commands()}
LEAVES = list(LEAF)


def _example_lines(command: dict) -> list[str]:
    epilog = command["epilog"] or ""
    assert epilog.startswith("Examples:\n\n\b\n"), command["path"]
    return [line[2:] for line in epilog.split("\b\n", 1)[1].splitlines()]


@pytest.mark.parametrize("path", LEAVES)
def test_every_command_has_examples_printed_exactly_as_written(path):
    command = LEAF[path]
    lines = _example_lines(command)
    assert 1 <= len(lines) <= 5
    assert all(len(line) + 4 <= 80 for line in lines), lines  # fits at 80 columns
    text = generate.help_text(path.split()[1:])
    shown = text.split("  Examples:\n\n", 1)[1].splitlines()
    assert shown == [f"    {line}" for line in lines]  # not re-wrapped, not joined
    assert any(re.search(r"(^|[\s($])relay ", line) for line in lines)


def _relay_calls(line: str) -> list[list[str]]:
    """The relay command lines in one example line (a shell line)."""
    code = line.split(" # ", 1)[0].split("   #", 1)[0]
    calls = []
    for match in re.finditer(r"(?:^|[;|(]|\$\()\s*(relay\s[^|;)<>#]*)", code):
        words = shlex.split(
            match.group(1).replace('"$ID"', str(uuid.uuid4())).replace('"$TOOL_USE_ID"', "toolu_1")
        )
        calls.append(words[1:])
    return calls


@pytest.mark.one_backend
@pytest.mark.parametrize("path", LEAVES)
def test_every_example_names_a_command_and_options_that_exist(relay, path):
    command = LEAF[path]
    calls = [call for line in _example_lines(command) for call in _relay_calls(line)]
    assert calls, path
    for words in calls:
        end = words.index("--") if "--" in words else len(words)  # (the rest is CMD's)
        r = relay(*words[:end], "--help", *words[end:])
        assert r.code == 0, (path, words, r.err)
        assert r.out.startswith("Usage: relay"), (path, words)


def test_root_help_groups_every_command_with_whole_summaries():
    text = generate.help_text([])
    assert max(len(line) for line in text.splitlines()) <= 80
    titles = [f"{t}:" for t in SECTIONS]
    positions = [text.index(f"\n{t}\n") for t in titles]
    assert positions == sorted(positions)
    listing = text[positions[0] :]
    assert "..." not in listing and "…" not in listing
    named = re.findall(r"^  ([a-z]+) {2,}\S", listing, re.M)
    top = [c["name"] for c in schema.build()["commands"] if c["name"] and " " not in c["name"]]
    assert sorted(named) == sorted(top)  # each command once
    for section, names in SECTIONS.items():
        block = text.split(f"\n{section}:\n", 1)[1].split("\n\n", 1)[0]
        assert re.findall(r"^  ([a-z]+) ", block, re.M) == [n for n in names if n in top]
    # the summaries fit: one line each
    assert len(re.findall(r"^ {11,}\S", listing, re.M)) == 0, listing


@pytest.mark.parametrize("group", ["peers", "ledger", "hook"])
def test_group_help_lists_whole_summaries(group):
    text = generate.help_text([group])
    listing = text.split("\nCommands:\n", 1)[1]
    assert "..." not in listing
    assert max(len(line) for line in text.splitlines()) <= 80


@pytest.mark.parametrize("columns", [" 60", "+60", "60 "])
def test_help_reads_columns_as_the_terminal_size_rule_does(relay, columns):
    """Click's help width follows ``shutil.get_terminal_size``, whose COLUMNS is read with
    ``int()``: a padded or signed value gives the same help as the plain number."""
    plain = relay("send", "--help", env={"COLUMNS": "60"})
    assert relay("send", "--help", env={"COLUMNS": columns}).out == plain.out
    assert plain.out != relay("send", "--help", env={"COLUMNS": "100"}).out
