"""The fleet as an MCP server (``agent-fleet mcp``; the official ``mcp`` SDK, extra ``mcp``).

Tools (each answers JSON, as text content and as structured content):

* ``deploy {task, input?, agents?, budget_tokens?, wait?, queue?, priority?}`` → ``{run_id, status,
  summary?, changes?}``. Without ``wait`` the run goes on in this server process, in its task group, and
  the call returns once the run is recorded; with it, the call returns the run's summary and its code
  changes (as ``agent-fleet changes --json`` lists them) when it stops. The run is checked as ``deploy``
  checks it, before anything is recorded; its input is never one of this server's own files (its store,
  its ``.fleet`` outputs, its fleet.yaml) nor outside its working directory
  (:mod:`agent_fleet.control.inputs`, with the admin's folders).
* ``status {run_id}`` → the summary (live figures while the run goes on).
* ``results {run_id, offset?, limit?}`` → ``{results: [rows of results.jsonl], total, offset}``.
* ``events {session_id, after?}`` → ``{session_id, events}``.
* ``budget_raise {run_id, tokens?, usd?}`` → the ``budget_raised`` event; a paused run that this server
  is not running is resumed in the background.
* ``review {run_id?}`` → ``{items}``: the open items of the review queue, as ``agent-fleet review
  --json`` lists them (low-confidence, refuted or unsure results, paused or failed sessions, alarms).

Resources: ``fleet://runs/{run_id}/report.md`` (the run's report) and ``fleet://runs/{run_id}/summary.json``.

Runs outlive the MCP sessions that started them (one client deploys, another watches); they end with
the server, which interrupts them resumably. Provider settings come from the server's environment
(``FLEET_BASE_URL``, ``FLEET_API_KEY`` …); no tool takes or returns a credential.

With ``--server URL`` (``agent-fleet mcp --server``) the tools act through a running ``agent-fleet
serve`` as the team of ``$FLEET_TOKEN`` instead (:class:`ServerService`): its input folders, its queues,
the server's one check and budgets, exactly as ``POST /v1/runs`` (``review`` and the report resource are
the local server's only).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any, Protocol

from mcp.server.fastmcp import FastMCP

from agent_fleet.config import load_config
from agent_fleet.control.inputs import Confinement
from agent_fleet.domain.events import SessionState
from agent_fleet.domain.ids import new_run_id
from agent_fleet.engine import RunOptions, load_run
from agent_fleet.errors import FleetError, SessionNotFound, UsageError
from agent_fleet.integrations.client import LocalFleet, RunOutcome
from agent_fleet.integrations.remote_fleet import ServerFleet
from agent_fleet.session import open_store
from agent_fleet.session.store import store_file

__all__ = ["FleetService", "McpService", "ServerService", "build_server", "serve"]

INSTRUCTIONS = (
    "Runs many LLM agents as one fleet over a list of items or a codebase: deploy a task, watch its status, "
    "page through its deduplicated results, raise a budget when sessions pause, and see what needs review."
)


class McpService(Protocol):
    """What the tools call: :class:`FleetService` (this process's fleet) or :class:`ServerService`."""

    async def deploy(self, task: str, input: str | None, agents: int, budget_tokens: int | None, wait: bool,
                     queue: str | None = None, priority: str | None = None) -> dict[str, Any]: ...  # fmt: skip
    async def status(self, run_id: str) -> dict[str, Any]: ...
    async def results(self, run_id: str, offset: int, limit: int) -> dict[str, Any]: ...
    async def events(self, session_id: str, after: int) -> dict[str, Any]: ...
    async def budget_raise(self, run_id: str, tokens: int | None, usd: str | None) -> dict[str, Any]: ...
    async def review(self, run_id: str | None) -> dict[str, Any]: ...
    async def document(self, run_id: str, name: str) -> str: ...


class FleetService:
    """The tools' behaviour: a local fleet and the runs this server drives, in one task group."""

    def __init__(
        self,
        fleet: LocalFleet,
        tasks: asyncio.TaskGroup,
        *,
        config_path: str | None = None,
        defaults: Mapping[str, Any] | None = None,
        workdir: str | None = None,
    ) -> None:
        self.fleet = fleet
        self._tasks = tasks
        self._config_path = config_path
        self._defaults = dict(defaults or {})  # RunOptions the server gives every run (e.g. embedder)
        self._live: dict[str, asyncio.Task[None]] = {}
        self.failures: dict[str, FleetError] = {}  # run id → what stopped its background drive
        self.confinement = Confinement.build(  # this server's own files are never an input
            workdir=workdir or os.getcwd(),
            teams={},
            config_path=config_path,
            store_file=store_file(fleet.store_url),
            extra=_queues_file(config_path),
        )

    def live(self, run_id: str) -> bool:
        task = self._live.get(run_id)
        return task is not None and not task.done()

    async def deploy(
        self,
        task: str,
        input: str | None,
        agents: int,
        budget_tokens: int | None,
        wait: bool,
        queue: str | None = None,
        priority: str | None = None,
    ) -> dict[str, Any]:
        if input is not None:
            input = await asyncio.to_thread(self.confinement.confine, None, input)
        options = RunOptions(  # deploy checks them (the one check) before anything is recorded
            task=task,
            input_path=input,
            agents=agents,
            budget_tokens=budget_tokens,
            config_path=self._config_path,
            queue=queue,
            priority=priority,
            **self._defaults,
        )
        run_id = new_run_id()
        if wait:
            return _answer(await self.fleet.deploy(options, run_id=run_id))
        recorded = asyncio.Event()
        drive = self._start(
            run_id, lambda: self.fleet.deploy(options, run_id=run_id, on_start=lambda _rid: recorded.set())
        )
        waiting = asyncio.ensure_future(recorded.wait())
        try:
            await asyncio.wait({drive, waiting}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()
        if run_id in self.failures and not recorded.is_set():  # refused before anything was recorded
            raise self.failures.pop(run_id)
        return {"run_id": run_id, "status": "running"}

    async def results(self, run_id: str, offset: int, limit: int) -> dict[str, Any]:
        rows, total = await self.fleet.results(run_id, offset=offset, limit=limit)
        return {"results": rows, "total": total, "offset": offset}

    async def events(self, session_id: str, after: int) -> dict[str, Any]:
        return {"session_id": session_id, "events": await self.fleet.events(session_id, after)}

    async def review(self, run_id: str | None) -> dict[str, Any]:
        return {"items": await self.fleet.review(run_id)}

    async def status(self, run_id: str) -> dict[str, Any]:
        summary = await self.fleet.status(run_id)
        if run_id in self.failures:
            summary = {**summary, "error": str(self.failures[run_id])}
        return summary

    async def budget_raise(self, run_id: str, tokens: int | None, usd: str | None) -> dict[str, Any]:
        event = await self.fleet.raise_budget(run_id, tokens=tokens, usd=usd)
        resumed = False
        if not self.live(run_id) and await self.fleet.state(run_id) is SessionState.PAUSED:
            self._start(run_id, lambda: self.fleet.resume(run_id))
            resumed = True
        return {**event, "resumed": resumed}

    def _start(self, run_id: str, go: Callable[[], Coroutine[Any, Any, RunOutcome]]) -> asyncio.Task[None]:
        async def drive() -> None:
            try:
                await go()
            except FleetError as exc:  # the server goes on; status shows what stopped the run
                self.failures[run_id] = exc

        self.failures.pop(run_id, None)
        task = self._live[run_id] = self._tasks.create_task(drive())
        task.add_done_callback(lambda _t: self._live.pop(run_id, None) if self._live.get(run_id) is _t else None)
        return task

    def stop(self) -> None:
        """Interrupt the runs still going (each is resumable from its log)."""
        for task in list(self._live.values()):
            task.cancel()

    async def document(self, run_id: str, name: str) -> str:
        """A file the run wrote in its output directory."""
        async with open_store(self.fleet.store_url) as log:
            try:
                options, _ = await load_run(log, run_id)
            except SessionNotFound:
                raise SessionNotFound(f"no run {run_id!r} in this store") from None
        path = Path(options.out_dir or Path(".fleet") / "runs" / run_id) / name
        text = await asyncio.to_thread(lambda: path.read_text(encoding="utf-8") if path.exists() else None)
        if text is None:
            raise SessionNotFound(f"run {run_id} has not written {name} yet")
        return text


def _queues_file(config_path: str | None) -> tuple[str, ...]:
    """The Kueue file fleet.yaml's ``queues:`` names, if it names one (it is this server's own too)."""
    if config_path is None:
        return ()
    queues = load_config(config_path).queues
    if not isinstance(queues, str) or "\n" in queues.strip():
        return ()
    path = Path(queues)
    return (str(path if path.is_absolute() else Path(config_path).resolve().parent / path),)


def _answer(outcome: RunOutcome) -> dict[str, Any]:
    return {"run_id": outcome.run_id, "status": outcome.status, "summary": outcome.summary, "changes": outcome.changes}


class ServerService:
    """The tools through a running ``agent-fleet serve`` (``--server``), as the token's team."""

    def __init__(self, fleet: ServerFleet, *, defaults: Mapping[str, Any] | None = None) -> None:
        self.fleet = fleet
        self._defaults = {k: v for k, v in (defaults or {}).items() if v is not None}

    async def deploy(
        self,
        task: str,
        input: str | None,
        agents: int,
        budget_tokens: int | None,
        wait: bool,
        queue: str | None = None,
        priority: str | None = None,
    ) -> dict[str, Any]:
        body = {
            **self._defaults,
            "task": task,
            "input_path": input,
            "agents": agents,
            "budget_tokens": budget_tokens,
            "queue": queue,
            "priority": priority,
        }
        run_id = await self.fleet.submit(body)
        if not wait:
            return {"run_id": run_id, "status": "running"}
        detail = await self.fleet.wait(run_id)
        return {"run_id": run_id, "status": detail["status"], "summary": detail.get("summary") or detail}

    async def status(self, run_id: str) -> dict[str, Any]:
        detail = await self.fleet.detail(run_id)
        summary = detail.get("summary")
        return dict(summary) if isinstance(summary, dict) else detail

    async def results(self, run_id: str, offset: int, limit: int) -> dict[str, Any]:
        page = await self.fleet.results(run_id, offset, limit)
        return {"results": page["results"], "total": page["total"], "offset": offset}

    async def events(self, session_id: str, after: int) -> dict[str, Any]:
        return {"session_id": session_id, "events": await self.fleet.events(session_id, after)}

    async def budget_raise(self, run_id: str, tokens: int | None, usd: str | None) -> dict[str, Any]:
        event = await self.fleet.raise_budget(run_id, tokens, usd)
        resumed = False
        if (await self.fleet.detail(run_id))["status"] == "paused":
            await self.fleet.resume(run_id)
            resumed = True
        return {**event, "resumed": resumed}

    async def review(self, run_id: str | None) -> dict[str, Any]:
        raise UsageError("review is not available through a server: run `agent-fleet review` where it runs")

    async def document(self, run_id: str, name: str) -> str:
        if name == "summary.json":
            import json

            return json.dumps(await self.status(run_id), indent=2, sort_keys=True, default=str)
        raise SessionNotFound(f"{name} of run {run_id} is on the server: GET /v1/runs/{run_id}/results")


def build_server(service: McpService, *, host: str = "127.0.0.1", port: int = 8000) -> FastMCP:
    """The MCP server whose tools call ``service``."""
    server = FastMCP("agent-fleet", instructions=INSTRUCTIONS, host=host, port=port, log_level="WARNING")

    @server.tool()
    async def deploy(
        task: str,
        input: str | None = None,
        agents: int = 10,
        budget_tokens: int | None = None,
        wait: bool = False,
        queue: str | None = None,
        priority: str | None = None,
    ) -> dict[str, Any]:
        """Start a fleet run: decompose the input (a directory, or a .txt/.jsonl/.csv list) into `agents`
        partitions, one agent session each, admitted by the LocalQueue `queue` with the
        WorkloadPriorityClass `priority`. Returns the run id at once, or the summary and the code
        changes (a directory in a git repository) with wait=true."""
        return await service.deploy(task, input, agents, budget_tokens, wait, queue, priority)

    @server.tool()
    async def status(run_id: str) -> dict[str, Any]:
        """A run's summary: status, sessions by state, tokens, cost, results (live while it runs)."""
        return await service.status(run_id)

    @server.tool()
    async def results(run_id: str, offset: int = 0, limit: int = 100) -> dict[str, Any]:
        """A page of a run's deduplicated results (the rows of results.jsonl) and their total."""
        return await service.results(run_id, offset, limit)

    @server.tool()
    async def events(session_id: str, after: int = 0) -> dict[str, Any]:
        """A session's event log (or a run's own stream) after sequence number `after`."""
        return await service.events(session_id, after)

    @server.tool()
    async def budget_raise(run_id: str, tokens: int | None = None, usd: str | None = None) -> dict[str, Any]:
        """Raise a run's budget: new per-session token cap and/or dollar cap. Paused sessions resume."""
        return await service.budget_raise(run_id, tokens, usd)

    @server.tool()
    async def review(run_id: str | None = None) -> dict[str, Any]:
        """The open items of the review queue: low-confidence, refuted or unsure results, sessions paused
        or out of attempts, verification and decision-shape alarms (all recent runs without run_id)."""
        return await service.review(run_id)

    @server.resource("fleet://runs/{run_id}/report.md", mime_type="text/markdown")
    async def report(run_id: str) -> str:
        """The run's report."""
        return await service.document(run_id, "report.md")

    @server.resource("fleet://runs/{run_id}/summary.json", mime_type="application/json")
    async def summary(run_id: str) -> str:
        """The run's summary.json."""
        return await service.document(run_id, "summary.json")

    return server


async def serve(
    *,
    http: bool = False,
    host: str = "127.0.0.1",
    port: int = 8000,
    store: str | None = None,
    config_path: str | None = None,
    defaults: Mapping[str, Any] | None = None,
    on_ready: Callable[[str], None] | None = None,
    server: str | None = None,
    token: str | None = None,
) -> None:
    """Serve until stdin closes (stdio) or the process is interrupted (streamable HTTP). ``server``:
    act through that ``agent-fleet serve`` with ``token`` instead of a fleet in this process."""

    async def run(mcp: FastMCP) -> None:
        if http:
            if on_ready is not None:
                on_ready(f"http://{host}:{port}{mcp.settings.streamable_http_path}")
            await mcp.run_streamable_http_async()
        else:
            await mcp.run_stdio_async()

    if server is not None:
        async with ServerFleet(server, token) as remote:
            await run(build_server(ServerService(remote, defaults=defaults), host=host, port=port))
        return
    async with LocalFleet(store=store) as fleet, asyncio.TaskGroup() as tasks:
        service = FleetService(fleet, tasks, config_path=config_path, defaults=defaults)
        try:
            await run(build_server(service, host=host, port=port))
        finally:
            service.stop()
