"""Hook sessions: one agent conversation per accepted callback, and what it is made of.

``hooks.py`` builds the part a service holds (``HookSessions``); ``session.py`` runs one
callback's session turn by turn with its transcript as checkpoint and ``progress.py`` names the
progress mark it keeps; ``prompt.py`` writes what the model reads first, ``memory.py`` what it is
told of the session's earlier callbacks and ``compaction.py`` keeps each request inside its
budget (these three are pure); ``tools.py`` holds the sentinel tools the model may call and
``actions.py`` runs the model's calls of them, records each decision and trips the circuit
breaker; ``budgets.py`` counts every model call of a callback and refuses one once a
budget of SPEC §20 is spent. The queues that run sessions, the action policy and the MCP
client are sibling packages of ``callbacks/``.
"""
