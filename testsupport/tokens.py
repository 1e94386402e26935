"""Token counts: the yardstick of what relay's texts cost an agent (design.md §18).

Counted with OpenAI's o200k_base encoding, offline: ``bpe-openai`` (the `test` extra)
ships o200k_base's rank file in its wheel -- byte for byte the file tiktoken downloads
(its SHA-256, 446a9538…1a2d, is the one tiktoken checks) -- so nothing is fetched when a
test or a benchmark counts. Its counts were compared with tiktoken's own (fed that file)
and with the npm packages `js-tiktoken` and `gpt-tokenizer`, which bundle the ranks
themselves: the same on 3,797 texts (relay's guides, README, design.md, random text with
non-ASCII), for bpe-openai 0.1.0 to 0.1.4.

Not part of relay: relay never counts tokens at run time (a test or `python -m bench
tokens` does), so the tokenizer is a test dependency only.
"""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1)
def _encoding():  # type: ignore[no-untyped-def]
    import warnings

    with warnings.catch_warnings():  # its loader uses importlib.resources.open_binary
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai  # the `test` extra; relay itself never imports it

        encoding = bpe_openai.get_encoding("o200k_base")
        encoding.encode_ordinary("")  # (anything it loads lazily, loaded here)
        return encoding


def count(text: str) -> int:
    """How many o200k_base tokens ``text`` is (special tokens read as plain text)."""
    return len(_encoding().encode_ordinary(text))
