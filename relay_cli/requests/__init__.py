"""Requests between peers (design.md §3–§6): the request state machine as data
(``states``); the lifecycle of a request: what a caller gives, checked (``validate``),
creating requests (``sending``), taking them and recovering a lost claim (``claiming``),
acting on a request that exists and a person's acts on it (``lifecycle``), and their
public shape (``objects``); peers and their sessions and leases (``peers``), time-based transitions
applied by every command (``due``), the commands that block (``waiting``) and the
sender's notices (``notices``).

May import: ``core`` and ``store``.
"""
