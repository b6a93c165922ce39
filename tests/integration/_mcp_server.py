"""A tiny MCP server for the tests (stdio by default; ``http PORTFILE`` is not used)."""

from __future__ import annotations

import os

from mcp.server.fastmcp import FastMCP

server = FastMCP("demo")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def server_pid() -> int:
    """The server's process id (tells whether agents share one server)."""
    return os.getpid()


@server.tool()
def token_is_set() -> str:
    """Whether the server received its credential (never the value)."""
    return "yes" if os.environ.get("DEMO_TOKEN") else "no"


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("this tool always fails")


if __name__ == "__main__":
    server.run("stdio")
