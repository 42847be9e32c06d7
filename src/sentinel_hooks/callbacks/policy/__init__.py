"""The action policy: whether an agent's action runs, waits for a person, or is refused.

``rules.py`` decides from the plain rules (pure); ``judge.py`` asks a small model about the judge
rules in scope; ``approvals.py`` puts ``run_command`` through both and pauses and resumes sessions
on an approval; ``commands.py`` runs an allowed command. The MCP calls go through the same rules
(``callbacks/mcp/calls.py``).
"""
