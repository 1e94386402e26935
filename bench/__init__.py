"""relay's proof harness: crash injection, faults, load, scale, wake-up latency, perf.

Run from the project root: ``python -m bench <crash|faults|load|scale|latency|perf|all>``.
Every measurement runs the real ``relay`` command (``python -m relay_cli``) in real
processes; the small samples in tests/store/test_crash.py, tests/store/test_sqlite_faults.py
and tests/requests/test_load.py call the same functions with small sizes.
"""
