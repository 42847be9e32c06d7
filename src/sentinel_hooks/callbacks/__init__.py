"""Callbacks: a fire's callback from the moment it is accepted until its hook session ends.

``intake/`` accepts it (silences, dedupe, the response contract) and hands it to a session queue
(``queues/``, a plug-in point), which runs its hook session (``sessions/``): a model
(``backends/``, a plug-in point) with the sentinel tools, MCP tools (``mcp/``) and commands, each
action put through the action policy (``policy/``). What the session sends goes down to ``relay/``.
"""
