"""How the integrations reach a fleet: the :class:`FleetClient` seam and :class:`LocalFleet`.

:class:`LocalFleet` runs the engine in this process through its public phase API (``deploy``,
``resume``, ``load_run``) over one session store — the same store the CLI's ``--store`` names, so
``agent-fleet status`` shows what an integration started. A fleet behind ``agent-fleet serve``
(``--server URL``) is another implementation of the same protocol; :func:`fleet_client` picks one.

Everything a client returns is plain JSON data: results are the rows of ``results.jsonl``, a summary
is ``summary.json``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from agent_fleet.domain.events import EventType, SessionRecord, SessionState
from agent_fleet.engine import RunOptions, RunReport, deploy, load_run, resume
from agent_fleet.engine.changes import run_changes_view
from agent_fleet.errors import SessionNotFound, UsageError
from agent_fleet.observe.summary import read_run_figures
from agent_fleet.options import budget_event_data
from agent_fleet.session import SessionLog, open_store, resolve_store_url
from agent_fleet.supervise import load_review, run_policy

__all__ = ["FleetClient", "LocalFleet", "RunOutcome", "check_items", "fleet_client", "items_run", "run_sync"]

T = TypeVar("T")

# States of a run's own stream after which nothing runs until someone resumes it.
STOPPED = frozenset({SessionState.COMPLETED, SessionState.FAILED, SessionState.PAUSED})


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """Where a run stands once a call returned: its status, summary and unique results."""

    run_id: str
    status: str  # completed | partial | failed | paused | interrupted
    summary: dict[str, Any]
    results: list[dict[str, Any]]
    changes: dict[str, Any] | None = None  # the code changes (``agent-fleet changes --json``)

    @property
    def paused(self) -> bool:
        return self.status == "paused"

    @property
    def cost_usd(self) -> float:
        return float(self.summary.get("cost_usd") or 0.0)

    @classmethod
    async def of(cls, report: RunReport, changes: dict[str, Any] | None = None) -> RunOutcome:
        """The report's results as ``results.jsonl`` holds them (its order, its JSON)."""
        rows = await asyncio.to_thread(_read_jsonl, Path(report.out_dir) / "results.jsonl")
        return cls(report.run_id, report.status, report.summary, rows, changes)


class FleetClient(Protocol):
    """What an integration needs from a fleet, local or remote."""

    async def deploy(
        self, options: RunOptions, *, run_id: str | None = None, on_start: Callable[[str], None] | None = None
    ) -> RunOutcome:
        """Run a new fleet to its end (or its budget pause); ``run_id`` names it."""
        ...

    async def resume(self, run_id: str) -> RunOutcome:
        """Continue a recorded run that is not running, to its end or its next pause."""
        ...

    async def state(self, run_id: str) -> SessionState | None:
        """The state of the run's own stream, or None when no such run is recorded."""
        ...

    async def outcome(self, run_id: str) -> RunOutcome:
        """What a stopped run wrote: its summary and results (nothing is run)."""
        ...

    async def raise_budget(
        self, run_id: str, *, tokens: int | None = None, usd: str | None = None, note: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Record a ``budget_raised`` event (new caps); returns the event."""
        ...

    async def events(self, session_id: str, after: int = 0) -> list[dict[str, Any]]:
        """A session's (or a run's own) events after ``after``."""
        ...

    async def status(self, run_id: str) -> dict[str, Any]:
        """The summary of a stopped run, or the live figures of a running one."""
        ...

    async def results(self, run_id: str, *, offset: int = 0, limit: int = 100) -> tuple[list[dict[str, Any]], int]:
        """A page of the run's unique results and how many there are."""
        ...

    async def review(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """The open items of the review queue (:mod:`agent_fleet.supervise`), of one run or the recent ones."""
        ...

    async def changes(self, run_id: str) -> dict[str, Any]:
        """The code changes the run's sessions made (``agent-fleet changes RUN_ID --json``)."""
        ...


def fleet_client(
    *,
    store: str | None = None,
    server: str | None = None,
    api_key: str | None = None,
    env: Mapping[str, str] | None = None,
) -> FleetClient:
    """The client for these settings: the local engine over ``store``, or the control plane at ``server``."""
    if server:
        raise UsageError(
            f"this integration runs its fleet in its own process: give store=... instead of server={server!r}"
            " (the MCP server acts through a server with `agent-fleet mcp --server URL`)"
        )
    return LocalFleet(store=store, api_key=api_key, env=env)


class LocalFleet:
    """The engine in this process over one session store (``--store`` semantics, ``FLEET_STORE``)."""

    def __init__(
        self, *, store: str | None = None, api_key: str | None = None, env: Mapping[str, str] | None = None
    ) -> None:
        self.store_url = resolve_store_url(store)
        self._api_key = api_key
        self._env = env
        self._log: SessionLog | None = None  # held open between `async with` and its exit

    async def __aenter__(self) -> LocalFleet:
        self._log = open_store(self.store_url)
        await self._log.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        log, self._log = self._log, None
        if log is not None:
            await log.close()

    @asynccontextmanager
    async def _store(self) -> AsyncIterator[SessionLog]:
        if self._log is not None:
            yield self._log
            return
        async with open_store(self.store_url) as log:
            yield log

    async def deploy(
        self, options: RunOptions, *, run_id: str | None = None, on_start: Callable[[str], None] | None = None
    ) -> RunOutcome:
        def started(rid: str, _engine: object) -> None:
            if on_start is not None:
                on_start(rid)

        report = await deploy(
            options, store_url=self.store_url, api_key=self._api_key, env=self._env, on_start=started, run_id=run_id
        )
        return await RunOutcome.of(report, await self.changes(report.run_id))

    async def resume(self, run_id: str) -> RunOutcome:
        report = await resume(run_id, store_url=self.store_url, api_key=self._api_key, env=self._env)
        return await RunOutcome.of(report, await self.changes(run_id))

    async def changes(self, run_id: str) -> dict[str, Any]:
        async with self._store() as log:
            return await run_changes_view(log, run_id)

    async def state(self, run_id: str) -> SessionState | None:
        async with self._store() as log:
            rec = await log.get_session(run_id)
        return rec.state if rec is not None and rec.kind == "run" else None

    async def outcome(self, run_id: str) -> RunOutcome:
        summary, out_dir = await self._summary(run_id)
        if summary is None:
            raise UsageError(f"run {run_id} has not written its outputs yet")
        results = await asyncio.to_thread(_read_jsonl, out_dir / "results.jsonl")
        return RunOutcome(run_id, str(summary["status"]), summary, results, await self.changes(run_id))

    async def raise_budget(
        self, run_id: str, *, tokens: int | None = None, usd: str | None = None, note: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        data = {**(note or {}), **budget_event_data(tokens, usd)}
        async with self._store() as log:
            await self._run_record(log, run_id)
            event = await log.emit_event(run_id, EventType.BUDGET_RAISED, data)
        return event.to_dict()

    async def events(self, session_id: str, after: int = 0) -> list[dict[str, Any]]:
        async with self._store() as log:
            if await log.get_session(session_id) is None:
                raise SessionNotFound(f"no session {session_id!r} in this store")
            return [e.to_dict() for e in await log.get_events(session_id, after=after)]

    async def status(self, run_id: str) -> dict[str, Any]:
        async with self._store() as log:
            rec = await self._run_record(log, run_id)
            if rec.state in STOPPED:
                summary, _ = await self._summary(run_id, log)
                if summary is not None:
                    return summary
            return await _live_figures(log, rec)

    async def results(self, run_id: str, *, offset: int = 0, limit: int = 100) -> tuple[list[dict[str, Any]], int]:
        if offset < 0 or limit < 1:
            raise UsageError(f"offset must be ≥ 0 and limit ≥ 1, not {offset} and {limit}")
        _, out_dir = await self._summary(run_id)
        rows = await asyncio.to_thread(_read_jsonl, out_dir / "results.jsonl")
        return rows[offset : offset + limit], len(rows)

    async def review(self, run_id: str | None = None) -> list[dict[str, Any]]:
        async with self._store() as log:
            if run_id is not None:
                runs = [await self._run_record(log, run_id)]
            else:
                runs = await log.list_runs(limit=50)
            items: list[dict[str, Any]] = []
            for rec in runs:
                items += await self._review_run(log, rec)
        return items

    async def _review_run(self, log: SessionLog, rec: SessionRecord) -> list[dict[str, Any]]:
        rid = rec.session_id
        items = await load_review(log, rid, await run_policy(log, rid))
        return [i.to_dict() for i in items if i.open]

    async def _run_record(self, log: SessionLog, run_id: str) -> SessionRecord:
        rec = await log.get_session(run_id)
        if rec is None or rec.kind != "run":
            raise SessionNotFound(f"no run {run_id!r} in this store")
        return rec

    async def _summary(self, run_id: str, log: SessionLog | None = None) -> tuple[dict[str, Any] | None, Path]:
        """The run's ``summary.json`` (None before it was written) and its output directory."""
        if log is None:
            async with self._store() as opened:
                return await self._summary(run_id, opened)
        await self._run_record(log, run_id)
        options, _ = await load_run(log, run_id)
        out_dir = Path(options.out_dir or Path(".fleet") / "runs" / run_id)
        path = out_dir / "summary.json"
        text = await asyncio.to_thread(lambda: path.read_text() if path.exists() else None)
        return (json.loads(text) if text else None), out_dir


async def _live_figures(log: SessionLog, rec: SessionRecord) -> dict[str, Any]:
    """A running run's figures so far (what ``agent-fleet status RUN --json`` shows)."""
    run_id = rec.session_id
    row = {"run_id": run_id, "status": str(rec.state), "task": rec.info.get("task", "")}
    return {**row, **await read_run_figures(log, run_id)}


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def check_items(items: Any, where: str) -> list[str]:
    """A list input given as data: a non-empty list of non-blank, one-line strings (UsageError else)."""
    if not isinstance(items, list | tuple) or not items:
        raise UsageError(f"{where} must be a non-empty list of strings")
    for i, item in enumerate(items):
        if not isinstance(item, str) or not item.strip() or "\n" in item or "\r" in item:
            raise UsageError(f"item {i} of {where} must be a non-blank line of text")
    return list(items)


def items_run(task: str, items: Sequence[str], *, agents: int, run_id: str, options: Mapping[str, Any]) -> RunOptions:
    """The options of a run over ``items``, written one per line beside its outputs (``items.txt``);
    the run reads them when it is planned. Blocking file I/O: call it in a thread."""
    out_dir = Path(options.get("out_dir") or Path(".fleet") / "runs" / run_id).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "items.txt"
    path.write_text("".join(f"{item}\n" for item in items), encoding="utf-8")
    extra = {**options, "out_dir": str(out_dir)}
    return RunOptions(task=task, input_path=str(path), agents=agents, **extra)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine from synchronous code: on this thread, or on a fresh one if a loop runs here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()
