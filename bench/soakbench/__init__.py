"""Helpers of ``bench/soak.py``: the measured Sentinel process and the store-size probes.

Like ``relaybench`` and ``watchbench``, it shares no code with the other benchmarks.
"""
