"""The foundation every other part stands on: the error table and exit statuses
(``errors``), relay's one clock (``clock``), what one call works with (``context``:
home, database URL, clock, streams, colour, debug), its limits, defaults and
vocabularies (``limits``), rendering of JSON and human output (``output``) and the
processes relay starts and watches (``process``), and SHA-256 (``digest``).

May import: nothing else in relay (the standard library only; ``rich`` lazily, where a
terminal needs it).
"""
