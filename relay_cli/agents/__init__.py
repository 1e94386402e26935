"""relay inside the agent runtimes (design.md §12): one entry per runtime
(``runtimes``), the hooks a runtime calls (``hook``, ``hook_run``) and their
installation (``install``), waking an idle agent (``wake``), `relay run` and the
per-peer Codex app server (``launcher``, ``codex_server``) and the agent guide
(``guide``).

May import: ``core``, ``store``, ``requests`` and ``ledger``.
"""
