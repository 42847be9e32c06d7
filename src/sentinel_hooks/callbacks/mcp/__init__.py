"""MCP in hook sessions: the connections to the configured MCP servers, and the calls sessions make.

``client.py`` holds one shared connection per server of ``mcpServers``; ``calls.py`` offers their
tools to a session and puts every call through the action policy (``callbacks/policy/``).
Sentinel's own MCP server, which offers its API as tools, is ``mcp_server/``.
"""
