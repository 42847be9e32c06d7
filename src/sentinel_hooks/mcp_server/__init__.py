"""Sentinel as an MCP server (SPEC.md §17): one set of tools, two ways to reach the service.

``tools.py`` says what each tool is and which API request it stands for; ``server.py`` builds the
SDK's server around a ``Backend`` that carries those requests. ``sentinel mcp`` (``cli/mcp.py``)
carries them over HTTP to a running service; ``/mcp`` (``api/mcp.py``) answers them in-process.
"""
