"""`ledger show` of captured output (design.md §10): output that is mostly not text is
cut for a person, saying how much was cut; `--json` keeps what was kept."""

from __future__ import annotations

import sys


def _run(relay, key: str, code: str):
    r = relay("once", "--key", key, "--", sys.executable, "-c", code)
    assert r.code == 0, r.err


def test_binary_output_is_cut_and_says_how_much(relay):
    _run(relay, "zeros", "import sys; sys.stdout.buffer.write(bytes(65536))")
    shown = relay("ledger", "show", "zeros")
    assert shown.code == 0, shown.err
    assert len(shown.out) < 8000  # not 256 KB of \x00
    assert "--- stdout (65536 bytes) ---" in shown.out
    text = " ".join(shown.out.split())
    assert "the first 260096 of the 262144 characters of its escaped form are cut" in text
    assert "relay ledger show zeros --json" in text
    whole = relay("ledger", "show", "zeros", "--json").json
    assert whole["stdout"] == "\x00" * 65536 and whole["stdout_bytes"] == 65536


def test_text_output_is_shown_whole(relay):
    _run(relay, "text", "print('line of a log\\n' * 3000, end='')")
    shown = relay("ledger", "show", "text")
    assert shown.out.count("line of a log\n") == 3000 and "cut" not in shown.out


def test_the_kept_size_of_cut_output_counts_bytes_not_replacements(relay):
    _run(relay, "big", "import sys; sys.stdout.buffer.write(bytes([0xff]) * 100000)")
    shown = relay("ledger", "show", "big")
    assert "--- stdout (last 65536 of 100000 bytes) ---" in shown.out
