"""MCP tools: one shared client pool per server, minimal toolsets per partition.

Servers come from fleet.yaml (``mcp_servers``) and are reached with the official ``mcp`` SDK over
stdio or streamable HTTP. Each server gets ``connections`` long-lived client sessions shared by all
agents (JSON-RPC multiplexes concurrent calls), never one server process per agent.

Invariants:

* Server credentials (``env`` for stdio, ``headers`` for HTTP; ``${VAR}`` is read from the engine's
  environment at start) live only in the pool: they are never in a tool spec, a tool result made
  by the pool, an error message, an agent's context or a sandbox.
* A partition's :class:`McpHands` offers only the tools named in its toolset, as
  ``<server>__<tool>``; any other name is an unknown tool.
* Connection tasks never raise into the caller: a server that dies is reconnected with backoff and
  its calls fail as tool errors meanwhile.
* ``aclose`` (or leaving ``async with``) stops every connection and its server process, from any
  task: the connections run in a TaskGroup inside one task the pool owns and awaits on close. Server
  processes carry the ``FLEET_OWNER`` marker so the reaper kills them if the engine dies without
  closing the pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

from agent_fleet.domain.model import ToolSpec
from agent_fleet.errors import ConfigError, FleetError
from agent_fleet.hands import isolation
from agent_fleet.hands.port import ToolOutput

__all__ = ["McpError", "McpHands", "McpPool", "McpServerConfig", "McpTool"]

_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SEP = "__"


class McpError(FleetError):
    """An MCP server could not be started or reached."""


@dataclass(frozen=True, slots=True, kw_only=True)
class McpServerConfig:
    name: str
    command: str | None = None  # stdio transport
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)  # the server's own credentials
    cwd: str | None = None
    url: str | None = None  # streamable HTTP transport
    headers: Mapping[str, str] = field(default_factory=dict)
    connections: int = 1
    call_timeout: float = 60.0
    start_timeout: float = 30.0

    def __post_init__(self) -> None:
        if not _NAME_RE.match(self.name) or _SEP in self.name:
            raise ConfigError(f"MCP server name {self.name!r}: use letters, digits, '-' or '_' (no '__')")
        if (self.command is None) == (self.url is None):
            raise ConfigError(f"MCP server {self.name}: give exactly one of 'command' (stdio) or 'url' (HTTP)")
        if self.connections < 1:
            raise ConfigError(f"MCP server {self.name}: connections must be at least 1")

    @classmethod
    def from_mapping(cls, name: str, data: Mapping[str, Any]) -> McpServerConfig:
        known = {"command", "args", "env", "cwd", "url", "headers", "connections", "call_timeout", "start_timeout"}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f"MCP server {name}: unknown keys {sorted(unknown)}")
        args = data.get("args", ())
        if isinstance(args, str):
            raise ConfigError(f"MCP server {name}: 'args' must be a list")
        return cls(
            name=name,
            command=data.get("command"),
            args=tuple(str(a) for a in args),
            env={str(k): str(v) for k, v in (data.get("env") or {}).items()},
            cwd=data.get("cwd"),
            url=data.get("url"),
            headers={str(k): str(v) for k, v in (data.get("headers") or {}).items()},
            connections=int(data.get("connections", 1)),
            call_timeout=float(data.get("call_timeout", 60.0)),
            start_timeout=float(data.get("start_timeout", 30.0)),
        )

    def __repr__(self) -> str:  # never show env or header values
        where = self.url if self.url is not None else " ".join([self.command or "", *self.args])
        return f"McpServerConfig(name={self.name!r}, at={where!r}, connections={self.connections})"


def _expand(values: Mapping[str, str], server: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in values.items():

        def sub(m: re.Match[str], key: str = k) -> str:
            var = m.group(1)
            if var not in os.environ:
                raise ConfigError(f"MCP server {server}: {key} refers to ${{{var}}}, which is not set")
            return os.environ[var]

        out[k] = _VAR_RE.sub(sub, v)
    return out


@dataclass(frozen=True, slots=True)
class McpTool:
    server: str
    name: str
    description: str
    input_schema: dict[str, Any]

    @property
    def qualified(self) -> str:
        return f"{self.server}{_SEP}{re.sub(r'[^A-Za-z0-9_-]', '_', self.name)}"[:64]

    def spec(self) -> ToolSpec:
        schema = self.input_schema or {"type": "object", "properties": {}}
        return ToolSpec(self.qualified, self.description or f"{self.name} (MCP server {self.server})", schema)


@dataclass(slots=True)
class _Connection:
    index: int
    session: Any = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    first_done: asyncio.Event = field(default_factory=asyncio.Event)  # first attempt ended either way
    in_flight: int = 0
    error: str | None = None


def _describe(exc: BaseException) -> str:
    """A safe one-liner: config errors and OS errors say what failed; others only their type."""
    if isinstance(exc, ConfigError):
        return str(exc)
    if isinstance(exc, OSError):
        return f"{type(exc).__name__}: {exc.strerror or exc}"
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    return type(exc).__name__


def _result_text(result: Any) -> tuple[str, bool]:
    parts: list[str] = []
    for item in getattr(result, "content", None) or ():
        text = getattr(item, "text", None)
        if isinstance(text, str):
            parts.append(text)
        elif hasattr(item, "model_dump"):
            parts.append(json.dumps(item.model_dump(mode="json", exclude_none=True)))
    structured = getattr(result, "structuredContent", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured))
    is_error = bool(getattr(result, "isError", False) or getattr(result, "is_error", False))
    return "\n".join(parts), is_error


class _Server:
    def __init__(self, config: McpServerConfig, owner: str) -> None:
        self.config = config
        self._owner = owner
        self.conns = [_Connection(i) for i in range(config.connections)]
        self.tools: dict[str, McpTool] = {}  # by MCP tool name
        self.stopping = False

    def _transport(self) -> Any:
        c = self.config
        if c.command is not None:
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            env = isolation.scrub_env()
            env.update(_expand(c.env, c.name))
            env[isolation.OWNER_VAR] = self._owner
            return stdio_client(StdioServerParameters(command=c.command, args=list(c.args), env=env, cwd=c.cwd))
        import mcp.client.streamable_http as http

        headers = _expand(c.headers, c.name)
        assert c.url is not None
        if hasattr(http, "streamable_http_client"):
            import httpx

            client = httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(c.call_timeout, read=300.0))
            return _owning(http.streamable_http_client(c.url, http_client=client), client)
        return http.streamablehttp_client(c.url, headers=headers)

    async def run(self, conn: _Connection) -> None:
        """Keep one connection up until the pool stops. Never raises (but may be cancelled)."""
        from mcp import ClientSession

        backoff = 0.5
        while not self.stopping:
            try:
                async with AsyncExitStack() as stack:
                    streams = await stack.enter_async_context(self._transport())
                    session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
                    async with asyncio.timeout(self.config.start_timeout):
                        await session.initialize()
                        if not self.tools:
                            await self._list_tools(session)
                    conn.session, conn.error, backoff = session, None, 0.5
                    conn.ready.set()
                    conn.first_done.set()
                    await conn.wake.wait()
            except Exception as exc:  # a dead server must not take the engine down: retry
                conn.error = _describe(exc)
                conn.first_done.set()
                if isinstance(exc, ConfigError):
                    return  # a missing variable will not appear by retrying
            finally:
                conn.session = None
                conn.ready.clear()
                conn.wake.clear()
            if self.stopping:
                return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 30.0)

    async def _list_tools(self, session: Any) -> None:
        cursor: str | None = None
        tools: dict[str, McpTool] = {}
        while True:
            page = await (session.list_tools(cursor) if cursor else session.list_tools())
            for t in page.tools:
                schema = getattr(t, "inputSchema", None) or getattr(t, "input_schema", None) or {}
                tools[t.name] = McpTool(self.config.name, t.name, t.description or "", dict(schema))
            cursor = getattr(page, "nextCursor", None) or getattr(page, "next_cursor", None)
            if not cursor:
                break
        self.tools = tools

    async def call(self, tool: str, arguments: dict[str, Any]) -> ToolOutput:
        ready = [c for c in self.conns if c.session is not None]
        if not ready:
            return ToolOutput(f"error: MCP server {self.config.name} is not reachable right now; retry later", True)
        conn = min(ready, key=lambda c: (c.in_flight, c.index))
        conn.in_flight += 1
        try:
            async with asyncio.timeout(self.config.call_timeout):
                result = await conn.session.call_tool(tool, arguments)
        except TimeoutError:
            return ToolOutput(f"error: {tool} timed out after {self.config.call_timeout:.0f} s", is_error=True)
        except Exception as exc:
            conn.wake.set()  # the session is broken: reconnect
            return ToolOutput(f"error: MCP call failed ({type(exc).__name__}); retry", is_error=True)
        finally:
            conn.in_flight -= 1
        text, is_error = _result_text(result)
        return ToolOutput(text, is_error=is_error)


@contextlib.asynccontextmanager
async def _owning(inner: Any, client: Any) -> Any:
    async with client, inner as streams:
        yield streams


class McpPool:
    """The shared MCP client pool. Use ``async with McpPool(configs) as pool`` (or start/aclose)."""

    def __init__(self, servers: Sequence[McpServerConfig]) -> None:
        names = [s.name for s in servers]
        if len(set(names)) != len(names):
            raise ConfigError(f"MCP server names repeat: {sorted(names)}")
        self._owner = isolation.owner_token()
        self._servers = {s.name: _Server(s, self._owner) for s in servers}
        self._connections: asyncio.Task[None] | None = None  # runs every connection; awaited on close
        self._stop = asyncio.Event()
        self._closed = False

    async def start(self, *, strict: bool = True) -> None:
        """Connect to every server and list its tools. ``strict``: raise if a server never came up."""
        if self._connections is not None or self._closed:
            return
        self._connections = asyncio.create_task(self._run_connections(), name="mcp-pool")
        await asyncio.gather(*(self._first_ready(s, c) for s in self._servers.values() for c in s.conns))
        failed = sorted(s.config.name for s in self._servers.values() if not s.tools)
        if failed and strict:
            reasons = "; ".join(
                f"{n}: {next((c.error for c in self._servers[n].conns if c.error), 'no tools')}" for n in failed
            )
            await self.aclose()
            raise McpError(f"MCP servers did not start: {reasons}")

    async def _run_connections(self) -> None:
        async with asyncio.TaskGroup() as tg:
            for server in self._servers.values():
                for conn in server.conns:
                    tg.create_task(server.run(conn))
            await self._stop.wait()
            for server in self._servers.values():
                server.stopping = True
                for conn in server.conns:
                    conn.wake.set()

    @staticmethod
    async def _first_ready(server: _Server, conn: _Connection) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(server.config.start_timeout + 1.0):
                await conn.first_done.wait()

    async def aclose(self) -> None:
        """Stop every connection and server process; safe from any task, and twice."""
        self._closed = True
        task = self._connections
        if task is None or task.done():
            return
        self._stop.set()
        await task  # cancelling this close cancels the connections at once instead

    async def __aenter__(self) -> McpPool:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- tools --------------------------------------------------------------------------------
    def tools(self, server: str | None = None) -> tuple[McpTool, ...]:
        servers = [self._servers[server]] if server is not None else list(self._servers.values())
        return tuple(t for s in servers for t in sorted(s.tools.values(), key=lambda t: t.name))

    def resolve(self, names: Iterable[str]) -> tuple[McpTool, ...]:
        """Tools for a toolset: ``server`` (all its tools) or ``server__tool``. Unknown: ConfigError."""
        picked: dict[str, McpTool] = {}
        for name in names:
            server, sep, tool = name.partition(_SEP)
            srv = self._servers.get(server)
            if srv is None:
                raise ConfigError(f"toolset names MCP server {server!r}, which is not configured")
            if not sep:
                picked.update((t.qualified, t) for t in srv.tools.values())
                continue
            match = [t for t in srv.tools.values() if t.name == tool or t.qualified == name]
            if not match:
                raise ConfigError(f"MCP server {server} has no tool {tool!r}")
            picked[match[0].qualified] = match[0]
        return tuple(picked[k] for k in sorted(picked))

    def toolset(self, names: Iterable[str]) -> McpHands:
        return McpHands(self, self.resolve(names))

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> ToolOutput:
        srv = self._servers.get(server)
        if srv is None or self._closed:
            return ToolOutput(f"error: no MCP server {server!r}", is_error=True)
        return await srv.call(tool, arguments)

    def statistics(self) -> dict[str, dict[str, int]]:
        return {
            name: {
                "connections": len(s.conns),
                "ready": sum(1 for c in s.conns if c.session is not None),
                "in_flight": sum(c.in_flight for c in s.conns),
                "tools": len(s.tools),
            }
            for name, s in self._servers.items()
        }

    def __repr__(self) -> str:
        return f"McpPool(servers={sorted(self._servers)}, closed={self._closed})"


class McpHands:
    """One partition's view of the pool: only its toolset. Closing it leaves the pool running."""

    def __init__(self, pool: McpPool, tools: Sequence[McpTool]) -> None:
        self._pool = pool
        self._tools = {t.qualified: t for t in tools}

    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(t.spec() for t in self._tools.values())

    async def execute(self, name: str, input: dict[str, Any]) -> ToolOutput:
        tool = self._tools.get(name)
        if tool is None:
            return ToolOutput(f"error: unknown tool {name!r}", is_error=True)
        return await self._pool.call(tool.server, tool.name, input)

    async def aclose(self) -> None:
        return None
