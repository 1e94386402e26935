"""SHA-256 as hex, the one digest relay stores (session tokens, fingerprints, prompts).

Python's own implementation (``_sha256``, ``_sha2`` since 3.12) gives the same digest as
hashlib's, which is OpenSSL's: hashlib's import loads OpenSSL, ~11 million instructions
at every start of `relay send` (bench/startup.py). hashlib stays the fallback, for a
Python built without its own SHA-256.
"""

from __future__ import annotations


def _constructor():
    try:
        from _sha256 import sha256  # Python 3.10, 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # Python 3.12 and later
        except ImportError:
            from hashlib import sha256
    return sha256


def sha256_hex(data: bytes) -> str:
    return _constructor()(data).hexdigest()
