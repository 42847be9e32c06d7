"""The parts of ``bench/watchers.py``: endpoint, measured processes, /proc readings, statistics, report.

Each measured role runs in its own process (``python -m watchbench.<role>``) so its CPU time
and memory can be read from /proc without counting the endpoint server or the orchestrator.
"""
