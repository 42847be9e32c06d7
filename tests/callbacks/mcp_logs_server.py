"""A small MCP server written with the SDK, for the MCP client tests: ``search`` and ``delete``.

Run as ``python mcp_logs_server.py stdio`` or ``python mcp_logs_server.py http PORT``. Every call
it receives is appended to the file named by $MCP_CALLS_FILE (so a test can tell that a denied
call never reached it), and its pid is written to $MCP_PID_FILE (so a test can tell it is gone).
"""

from __future__ import annotations

import json
import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("logs")


def _record(tool: str, arguments: dict[str, object]) -> None:
    path = os.environ.get("MCP_CALLS_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")


@server.tool(description="Search a service's recent log lines.")
def search(service: str, query: str = "", lines: int = 3) -> str:
    """Search logs."""
    _record("search", {"service": service, "query": query, "lines": lines})
    if lines > 100:
        return "x" * 10_000
    return "\n".join(f"{service}: ERROR connection refused ({query}) #{i}" for i in range(lines))


@server.tool(description="Delete a service's logs (destructive).")
def delete(service: str) -> str:
    """Delete logs."""
    _record("delete", {"service": service})
    return f"deleted the logs of {service}"


if __name__ == "__main__":
    pid_file = os.environ.get("MCP_PID_FILE")
    if pid_file:
        with open(pid_file, "w", encoding="utf-8") as file:
            file.write(str(os.getpid()))
    if sys.argv[1:2] == ["http"]:
        server.settings.log_level = "WARNING"
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
