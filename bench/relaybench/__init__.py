"""Helpers of ``bench/relay.py``: the webhook sink, the child processes, the load, the numbers.

Kept apart from ``watchbench`` (the watcher benchmark's package) on purpose: the two
benchmarks share no code, so either can change without breaking the other.
"""
