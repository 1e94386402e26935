"""relay's fixed limits and vocabularies (design.md §3, §4), defined once: the code checks
them, and the error table's fixed hints (``errors``) state them from here, so a hint can
never name another limit than the one enforced. No imports: everything may import this."""

from __future__ import annotations

MAX_TEXT_BYTES = 32768  # a request's text, a reply
MAX_DEPTH = 8  # in_reply_to chain
MAX_OPEN_DRAFTS = 100  # unsubmitted drafts per sender
DRAFT_TTL_S = 3600  # a draft lives this long unsubmitted
# Open requests (queued, delivered, acknowledged) per recipient; RELAY_QUEUE_CAP sets
# another cap for the calling process. A refused send is told to retry after
# QUEUE_RETRY_AFTER_S: the queue shrinks only when its recipient claims and finishes work
# or a deadline passes, neither of which relay can foresee, and one minute (the rate
# limit's window) keeps a sender that honours it to one attempt a minute per request.
QUEUE_CAP = 1000
QUEUE_RETRY_AFTER_S = 60
QUEUE_WARN_FRACTION = 0.8  # doctor warns above 80 % of the cap
# The lease of a session a hook joins (an agent has no heartbeat between its turns), and
# how long a wake waiter waits by default: as long as that session lives unrenewed.
HOOK_LEASE_S = 3600

# A peer name, matched against the whole value (fullmatch) in ASCII: "alice\n" is not one.
NAME_PATTERN = r"[a-z0-9][a-z0-9._-]{0,63}"
KINDS = ("claude", "codex", "gemini", "aider", "human", "script", "other")
