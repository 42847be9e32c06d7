"""Helpers of ``bench/sessions.py``: the model stand-in, the measured service, one run, the report.

The webhook sink and the child-process plumbing are ``relaybench``'s (``relaybench.sink``,
``relaybench.procs``); the Redis server is ``soakbench.probes.own_redis``.
"""
