"""SHA-256 as hex, the one digest relay stores (session tokens, fingerprints, prompts).

Python's own implementation (``_sha256``, ``_sha2`` since 3.12) gives the same digest as
hashlib's, which is OpenSSL's: hashlib's import loads OpenSSL, ~11 million instructions
at every start of `relay send` (bench/startup.py). hashlib stays the fallback, for a
Python built without its own SHA-256.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)
if TYPE_CHECKING:
    from typing import Any, Callable

# the constructor, found at the first digest (a failed import is not cached)
_SHA256: Callable[[bytes], Any] | None = None


def _constructor() -> Callable[[bytes], Any]:
    global _SHA256
    found = _SHA256
    if found is None:
        try:  # (by name: these modules have no type stubs)
            found = importlib.import_module("_sha2").sha256  # Python 3.12 and later
        except ImportError:
            try:
                found = importlib.import_module("_sha256").sha256  # Python 3.10, 3.11
            except ImportError:
                from hashlib import sha256

                found = sha256
        _SHA256 = found
    return found


def sha256_hex(data: bytes) -> str:
    digest: str = _constructor()(data).hexdigest()
    return digest
