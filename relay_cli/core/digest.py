"""SHA-256 as hex, the one digest relay stores (session tokens, fingerprints, prompts).

Python's own implementation (``_sha256``, ``_sha2`` since 3.12) gives the same digest as
hashlib's, which is OpenSSL's: hashlib's import loads OpenSSL, ~11 million instructions
at every start of `relay send` (bench/startup.py). hashlib stays the fallback, for a
Python built without its own SHA-256.
"""

from __future__ import annotations

_SHA256 = None  # the constructor, found at the first digest (a failed import is not cached)


def _constructor():
    global _SHA256
    if _SHA256 is None:
        try:
            from _sha2 import sha256  # Python 3.12 and later
        except ImportError:
            try:
                from _sha256 import sha256  # Python 3.10, 3.11
            except ImportError:
                from hashlib import sha256
        _SHA256 = sha256
    return _SHA256


def sha256_hex(data: bytes) -> str:
    return _constructor()(data).hexdigest()
