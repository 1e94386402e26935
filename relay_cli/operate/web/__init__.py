"""`relay web`, the view in the browser (design.md §17): ``server`` (the HTTP server on
127.0.0.1, its token and Host checks, its headers), ``hub`` (the one reader of the
database, waking as `relay wait` does), ``page`` (watch's snapshot as the page's JSON
document) and ``static/`` (the page: plain HTML, CSS and a small script, package data).

Nothing else in relay imports it: only `relay web` pays for an HTTP server.
"""
