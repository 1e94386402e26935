"""What the tests and the benchmarks (bench/) both run relay against: a throwaway
PostgreSQL server (pgserver.py) and network namespaces on one machine (netns.py). And the
helpers tests of several parts share: a connection lost at COMMIT (commit_faults.py), a
`relay` whose `once` renews its entry faster (renewing.py, run as a script) and the JSON
Schema validator the runtimes' hook schemas need (schema_subset.py, which the end-to-end
harness in e2e/ uses too). And `relay web` as a real process with a headless chromium to
look at it (browser.py).

Neither is part of relay: the wheel holds relay_cli only; the source distribution carries
this folder with tests/ and bench/ (MANIFEST.in). Import it from the project root (the
tests' conftest.py puts the root on ``sys.path``; ``python -m bench`` runs there).
"""
