"""What the tests and the benchmarks (bench/) both run relay against: a throwaway
PostgreSQL server (pgserver.py) and network namespaces on one machine (netns.py).

Neither is part of relay: the wheel holds relay_cli only; the source distribution carries
this folder with tests/ and bench/ (MANIFEST.in). Import it from the project root (the
tests' conftest.py puts the root on ``sys.path``; ``python -m bench`` runs there).
"""
