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
def _encoder():  # type: ignore[no-untyped-def]
    """o200k_base's encoder: bpe-openai's Rust tokenizer (``bpe_openai._bindings``), loaded
    on its own. The package's ``Encoding.encode_ordinary`` is that tokenizer's ``encode``
    behind a wrapper, but importing the package reads three rank files into Python
    dictionaries first (o200k_base, cl100k_base and voyage3_base: ~1.1 s of CPU in each
    test process that counts); the Rust tokenizer carries its own ranks (~0.07 s)."""
    import importlib.machinery
    import importlib.util
    import os

    spec = importlib.util.find_spec("bpe_openai")  # (found, not imported)
    try:
        folder = spec.submodule_search_locations[0]
        (name,) = [
            f
            for f in os.listdir(folder)
            if f.startswith("_bindings.")
            and f.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
        ]
        loader = importlib.machinery.ExtensionFileLoader(
            "bpe_openai._bindings", os.path.join(folder, name)
        )
        module = importlib.util.module_from_spec(
            importlib.util.spec_from_loader(loader.name, loader)
        )
        loader.exec_module(module)
        return module.tokenizer_for_encoding("o200k_base").encode
    except (AttributeError, TypeError, ValueError, ImportError, OSError):
        return _encoding().encode_ordinary  # another layout: through the package


@functools.lru_cache(maxsize=1)
def _encoding():  # type: ignore[no-untyped-def]
    """bpe-openai's ``Encoding`` for o200k_base (the package's own interface)."""
    import warnings

    with warnings.catch_warnings():  # its loader uses importlib.resources.open_binary
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai  # the `test` extra; relay itself never imports it

        encoding = bpe_openai.get_encoding("o200k_base")
        encoding.encode_ordinary("")  # (anything it loads lazily, loaded here)
        return encoding


def count(text: str) -> int:
    """How many o200k_base tokens ``text`` is (special tokens read as plain text)."""
    if not text:
        return 0
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: replaced, as ``encode_ordinary`` does
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return len(_encoder()(text))
