"""A fleet behind ``agent-fleet serve``, for the integrations: its REST API under ``/v1/`` over HTTP.

:class:`ServerFleet` is what the MCP tools call when ``agent-fleet mcp --server URL`` forwards them to a
server: a run is submitted as ``POST /v1/runs`` (the team of the bearer token, its queues, its input
folders and the server's one check decide, before anything is recorded), and read back through the
run's routes. Errors keep the server's one line and become :class:`~agent_fleet.errors.FleetError`\\ s
(403 :class:`~agent_fleet.errors.Refused`, 404 :class:`~agent_fleet.errors.SessionNotFound`, other 4xx
:class:`~agent_fleet.errors.UsageError`, unreachable :class:`~agent_fleet.errors.UnreachableError`).
The token is only ever sent, never shown.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

import httpx

from agent_fleet.errors import FleetError, Refused, SessionNotFound, UnreachableError, UsageError

__all__ = ["ServerFleet"]

_ENDED_POLL_S = 0.5


class ServerFleet:
    """An open HTTP client of one server; ``async with`` closes it."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.AsyncClient(base_url=self.url, headers=headers, timeout=60, trust_env=False)

    async def __aenter__(self) -> ServerFleet:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.aclose()

    async def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        try:
            response = await self._client.request(method, path, json=body)
        except httpx.HTTPError:
            raise UnreachableError(f"agent-fleet serve at {self.url} is unreachable") from None
        try:
            data = response.json()
        except ValueError:
            data = None
        if response.status_code < 400:
            return data
        error = data.get("error") if isinstance(data, dict) else None
        message = (
            str(error.get("message")) if isinstance(error, dict) else f"the server answered {response.status_code}"
        )
        if response.status_code == 404:
            raise SessionNotFound(message)
        if response.status_code == 403:
            raise Refused(message)
        if response.status_code < 500:
            raise UsageError(message)
        raise FleetError(message)

    @staticmethod
    def run_path(run_id: str, tail: str = "") -> str:
        return f"/v1/runs/{quote(run_id, safe='')}{tail}"

    async def submit(self, body: dict[str, Any]) -> str:
        """``POST /v1/runs``: the new run's id (nothing is recorded when the server refuses it)."""
        started = await self.request("POST", "/v1/runs", {k: v for k, v in body.items() if v is not None})
        return str(started["run_id"])

    async def detail(self, run_id: str) -> dict[str, Any]:
        data: dict[str, Any] = await self.request("GET", self.run_path(run_id))
        return data

    async def wait(self, run_id: str) -> dict[str, Any]:
        """Poll until the run stops; its detail (with its summary once it wrote one)."""
        while (detail := await self.detail(run_id))["status"] in ("running", "created"):
            await asyncio.sleep(_ENDED_POLL_S)
        return detail

    async def results(self, run_id: str, offset: int, limit: int) -> dict[str, Any]:
        data: dict[str, Any] = await self.request(
            "GET", self.run_path(run_id, f"/results?offset={int(offset)}&limit={int(limit)}")
        )
        return data

    async def events(self, session_id: str, after: int) -> list[dict[str, Any]]:
        run_id = session_id.partition(".")[0]
        query = f"/events?session={quote(session_id, safe='')}&after={int(after)}&limit=10000"
        data = await self.request("GET", self.run_path(run_id, query))
        return list(data["events"])

    async def raise_budget(self, run_id: str, tokens: int | None, usd: str | None) -> dict[str, Any]:
        body = {k: v for k, v in (("tokens", tokens), ("usd", usd)) if v is not None}
        data: dict[str, Any] = await self.request("POST", self.run_path(run_id, "/budget"), body)
        return data

    async def resume(self, run_id: str) -> None:
        await self.request("POST", self.run_path(run_id, "/resume"))
