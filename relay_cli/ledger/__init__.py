"""The side-effect ledger of `relay once` (design.md §10): an entry's states and every
transition as data (``states``), the gates of a call and a person's acts on an entry
(``entries``), the run of the command itself (``once``) and what a call ended with, as
one typed result that knows its JSON document, exit status and a person's notes
(``outcome``).

May import: ``core``, ``store`` and ``requests`` (the deadlines every command applies).
"""
