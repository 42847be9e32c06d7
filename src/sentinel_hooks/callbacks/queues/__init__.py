"""Session queues, a plug-in point: what holds accepted callbacks until their hook session runs.

``base.py`` is the ``SessionQueue`` Protocol, what every queue shares and the registry
(``create_session_queue``); ``local.py`` is the in-process queue, ``stream.py`` the Redis Stream
one that lets any replica run any session, with its Lua scripts in ``stream_scripts.py``.
"""
