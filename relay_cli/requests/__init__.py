"""Requests between peers (design.md §3–§6): the request state machine as data
(``states``), the lifecycle of a request from prepare to reply and a person's acts on it
(``lifecycle``), peers and their sessions and leases (``peers``), time-based transitions
applied by every command (``due``), the commands that block (``waiting``) and the
sender's notices (``notices``).

May import: ``core`` and ``store``.
"""
