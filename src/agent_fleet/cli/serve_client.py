"""``--server URL`` (or ``$FLEET_SERVER``): the run commands against ``agent-fleet serve`` over HTTP.

The bearer token comes from ``$FLEET_TOKEN`` and is only ever sent, never printed. The server's error
shape ``{"error": {"type", "message"}}`` becomes the command's one line on stderr, with the exit code
the local command would have used (bad input 2, not found 2, unreachable 4).
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

import typer

from agent_fleet.errors import FleetError, SessionNotFound, UnreachableError, UsageError

if TYPE_CHECKING:
    import httpx

    from agent_fleet.options import RunOptions

__all__ = ["SERVER_OPTION", "Remote", "ServerUnreachable", "run_body"]

SERVER_OPTION = typer.Option(
    None, "--server", envvar="FLEET_SERVER", help="Use this `agent-fleet serve` (URL; token from $FLEET_TOKEN)."
)

_POLL_S = 0.5
# What a run submitted to a server may set; the rest (provider, fleet.yaml, output directory, CLI
# agents, the API concurrency) is the server's.
_REMOTE_FIELDS = (
    "task",
    "input_path",
    "agents",
    "budget_tokens",
    "budget_usd",
    "timeout",
    "model",
    "queue",
    "priority",
    "requests",
    "max_turns",
    "max_tokens",
    "temperature",
    "seed",
    "max_attempts",
    "embedder",
    "embedding_model",
    "dedup_scope",
    "dedup_threshold",
)
_SERVER_SIDE = {
    "provider": "--provider",
    "config_path": "--config",
    "out_dir": "--out",
    "agent_cmd": "--agent-cmd",
    "fleet_budget_usd": "--fleet-budget-usd",
}


class ServerUnreachable(UnreachableError):
    """No ``agent-fleet serve`` answers at the URL."""


def run_body(options: RunOptions) -> dict[str, Any]:
    """The ``POST /v1/runs`` body for ``deploy``'s options (UsageError for what the server decides)."""
    for name, flag in _SERVER_SIDE.items():
        if getattr(options, name) is not None:
            raise UsageError(f"{flag} is the server's to set; leave it out with --server")
    if options.max_concurrency:
        raise UsageError("--max-concurrency is the server's to set; leave it out with --server")
    data = {k: getattr(options, k) for k in _REMOTE_FIELDS}
    return {k: v for k, v in data.items() if v is not None}


class Remote:
    def __init__(self, url: str, token: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.token = token if token is not None else os.environ.get("FLEET_TOKEN") or None

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        import httpx

        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            with httpx.Client(base_url=self.url, headers=headers, timeout=60, trust_env=False) as client:
                response = client.request(method, path, json=body)
        except httpx.HTTPError:
            raise ServerUnreachable(f"agent-fleet serve at {self.url} is unreachable") from None
        return _answer(response)

    def run_detail(self, run_id: str) -> dict[str, Any]:
        data: dict[str, Any] = self.request("GET", f"/v1/runs/{run_id}")
        return data

    def wait(self, run_id: str) -> dict[str, Any]:
        """Poll until the run ends; its summary (or its figures, when it failed without one)."""
        while True:
            detail = self.run_detail(run_id)
            if detail["status"] not in ("running", "created"):
                if "summary" in detail:
                    return dict(detail["summary"])
                if "error" in detail:
                    raise FleetError(f"run {run_id} failed: {detail['error']}")
                raise FleetError(f"run {run_id} ended {detail['status']} without a summary")
            time.sleep(_POLL_S)


def _answer(response: httpx.Response) -> Any:
    try:
        data = response.json()
    except ValueError:
        data = None
    if response.status_code < 400:
        return data
    error = data.get("error") if isinstance(data, dict) else None
    message = str(error.get("message")) if isinstance(error, dict) else f"the server answered {response.status_code}"
    if response.status_code == 404:
        raise SessionNotFound(message)
    if response.status_code in (401, 403):
        raise UsageError(f"{message} (is $FLEET_TOKEN set?)" if response.status_code == 401 else message)
    if response.status_code < 500:
        raise UsageError(message)
    raise FleetError(message)
