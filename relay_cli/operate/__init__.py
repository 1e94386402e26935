"""Operating relay, for the person who runs it (design.md §9, §11): `relay doctor`
(``doctor``, a folder: its checks by area, its judgement and its screen), `relay watch`
(``watch``), `relay web` (``web``, a folder: its server, its reader of the database, its
page), retention and `relay prune` (``retention``), `relay export` (``export``) and
`relay demo` (``demo``).

May import: ``core``, ``store``, ``requests``, ``ledger`` and ``agents``.
"""
