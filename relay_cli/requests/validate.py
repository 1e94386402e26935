"""What a caller gives, checked (design.md §4, §14): ids and their prefixes, texts, the
options of a request, and the fingerprint that makes a retry the same request."""

from __future__ import annotations

import re

from ..core.command import Said, relay
from ..core.digest import sha256_hex
from ..core.errors import RelayError
from ..core.limits import (
    MAX_ATTEMPTS_RANGE,
    MAX_TEXT_BYTES,
    MIN_PREFIX,
    STATES,
)

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)
if TYPE_CHECKING:
    from typing import Any

if TYPE_CHECKING:
    from relay_cli.store import RequestStore


ON_LOST = ("unknown", "redeliver")


def new_id() -> str:
    """A fresh request id: a random UUID (``relay id``, and ``send`` without --id)."""
    import uuid  # (imported where used: it imports platform, ~3 ms, a hook never needs)

    return str(uuid.uuid4())


# uuid.UUID reads its 32 digits with int(), which takes a sign and non-ASCII digits too
_UUID_TEXT = r"(?:urn:uuid:)?\{?[0-9a-fA-F-]+\}?"  # compiled at first use (re caches it)


def _canonical(value: object) -> str:
    """A full UUID in canonical lowercase form; ValueError for anything else."""
    import uuid

    s = str(value).strip()
    return str(uuid.UUID(s if re.fullmatch(_UUID_TEXT, s, re.ASCII) else "not a UUID"))


def validate_id(value: str, what: str = "id") -> str:
    """A full id, in canonical lowercase form. Where an id goes into a fingerprint or names
    a new request (``send --id``, ``prepare --id``, ``--in-reply-to``) only this is accepted."""
    try:
        canonical = _canonical(value)
    except (ValueError, AttributeError, TypeError):
        short = value.strip().lower() if isinstance(value, str) else ""
        raise RelayError(
            "invalid_id",
            f"{what} {value!r} is not a UUID",
            detail=Said.of(
                f"{what} takes a full id, not a prefix: it names new work or goes into the "
                "fingerprint, where a prefix could mean another request tomorrow; ",
                relay("show", short),
                " prints the whole id",
            )
            if _is_prefix(short)
            else None,
        ) from None
    if canonical in RESERVED_IDS:
        # a placeholder, not a chosen id: every script whose id variable fell back to it
        # would share one request (design.md §14)
        raise RelayError(
            "invalid_id",
            f"{what} {canonical} is the "
            f"{RESERVED_IDS[canonical]} UUID, a placeholder rather than an id",
        )
    return canonical


RESERVED_IDS = {
    "00000000-0000-0000-0000-000000000000": "nil",
    "ffffffff-ffff-ffff-ffff-ffffffffffff": "max",
}


_CANONICAL = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
_HEX = frozenset("0123456789abcdef")
MAX_CANDIDATES = 10


def _is_prefix(s: str) -> bool:
    """``s`` (lowercase) is a prefix of at least MIN_PREFIX characters of a canonical id."""
    return MIN_PREFIX <= len(s) < len(_CANONICAL) and all(
        c == "-" if t == "-" else c in _HEX for c, t in zip(s, _CANONICAL[: len(s)], strict=True)
    )


def validate_ref(value: str, what: str = "id") -> str:
    """An id that names an existing request (design.md §14): a full id (returned canonical,
    36 characters) or a prefix of at least 8 characters of a canonical id (returned in
    lowercase, shorter than 36). ``resolve_ref`` turns a prefix into the id it names."""
    s = value.strip().lower() if isinstance(value, str) else ""
    if _is_prefix(s):
        return s
    try:
        return _canonical(value)
    except (ValueError, AttributeError, TypeError):
        raise RelayError(
            "invalid_id",
            f"{what} {value!r} is not a UUID, nor a prefix of at least "
            f"{MIN_PREFIX} characters of one",
        ) from None


def resolve_ref(store: RequestStore, ref: str, *, drafts: bool = False, what: str = "id") -> str:
    """The full id that ``ref`` (from ``validate_ref``) names, as git resolves a short hash:
    a full id is itself; a prefix must match exactly one request (tombstones included; with
    ``drafts``, unsubmitted drafts too): none is ``request_not_found``, several are
    ``ambiguous_id`` listing them. The lookup is a range scan of the primary key."""
    if len(ref) == len(_CANONICAL):
        return ref
    found: dict[str, str] = {
        r["id"]: f"{r['state']}, {r['from_peer']} -> {r['to_peer']}"
        for r in store.requests_with_prefix(ref, MAX_CANDIDATES + 1)
    }
    if drafts:
        for r in store.drafts_with_prefix(ref, MAX_CANDIDATES + 1):
            found.setdefault(r["id"], f"unsubmitted draft, {r['from_peer']} -> {r['to_peer']}")
    if not found:
        kind = "request or draft" if drafts else "request"
        raise RelayError("request_not_found", f"no {kind} id starts with {ref}")
    if len(found) == 1:
        return next(iter(found))
    ids = sorted(found)
    listed = "; ".join(f"{i} ({found[i]})" for i in ids[:MAX_CANDIDATES])
    more = len(ids) > MAX_CANDIDATES
    raise RelayError(
        "ambiguous_id",
        f"{what} {ref} matches {'more than ' if more else ''}{min(len(ids), MAX_CANDIDATES)} "
        "requests",
        detail=f"candidates: {listed}{'; and more' if more else ''}",
    )


def validate_text(data: str | bytes, what: str = "text") -> str:
    """UTF-8, 1..32768 bytes, no NUL (design.md §4). Returns the text."""
    if isinstance(data, str):
        try:
            raw = data.encode("utf-8")
        except UnicodeEncodeError:
            raise RelayError("invalid_text", f"{what} is not valid UTF-8") from None
    else:
        raw = bytes(data)
    if not raw:
        raise RelayError("invalid_text", f"{what} is empty")
    if len(raw) > MAX_TEXT_BYTES:  # (stdin and files are read only this far)
        raise RelayError("text_too_large", f"{what} is over {MAX_TEXT_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RelayError("invalid_text", f"{what} is not valid UTF-8") from None
    if "\x00" in text:
        raise RelayError("invalid_text", f"{what} contains a NUL byte")
    if not text.strip():  # as empty as no text: an empty variable or heredoc (design.md §4)
        raise RelayError(
            "invalid_text",
            f"{what} is only whitespace (spaces, tabs or newlines): there is nothing to "
            "read; was the variable or heredoc that holds it empty?",
        )
    return text


def one_of(value: str, choices: tuple[str, ...], what: str) -> str:
    """``value`` when it is one of ``choices``, else ``usage_error`` naming them."""
    if value not in choices:
        raise RelayError(
            "usage_error", f"{what} must be one of {', '.join(choices)}, not {value!r}"
        )
    return value


def validate_on_lost(value: str) -> str:
    return one_of(value, ON_LOST, "--on-lost")


def validate_max_attempts(value: int) -> int:
    low, high = MAX_ATTEMPTS_RANGE
    if not isinstance(value, int) or not low <= value <= high:
        raise RelayError("usage_error", f"--max-attempts must be {low} to {high}, not {value!r}")
    return value


def validate_state(value: str) -> str:
    return one_of(value, STATES, "--state")


def validate_states(values: list[str] | None) -> list[str]:
    return [validate_state(v) for v in values or []]


def either(words: tuple[str, ...]) -> str:
    """``a, b or c``."""
    return ", ".join(words[:-1]) + f" or {words[-1]}" if len(words) > 1 else "".join(words)


def fingerprint(values: list[Any]) -> str:
    import json  # imported here: `relay --help` and `relay id` need no JSON (start-up)

    doc = json.dumps(values, ensure_ascii=False, separators=(",", ":"))
    return sha256_hex(doc.encode("utf-8"))
