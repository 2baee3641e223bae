"""A tiny stdio MCP server for tests/turn/test_ecosystem.py: two tools, started with
`python tests/support/mcp_server_tools.py`."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("agency-swarm-test-tools")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


if __name__ == "__main__":
    server.run("stdio")
