"""One A2A task = one fleet run of ``serve``'s :class:`~agent_fleet.control.FleetHost`.

``execute`` submits the run as ``POST /v1/runs`` does (the same checks, the caller's team and queues),
then follows it: ``submitted`` → ``working`` (the run's id in the status message) → ``completed`` with
two artifacts, the run's figures and summary, and its deduplicated results. A run that fails, or that
was interrupted, ends the task ``failed``; a request that is no valid run is ``rejected``. A run whose
sessions paused on their budget leaves the task ``input-required``: a reply on the task with new caps
raises them and resumes the run. ``cancel`` stops the run (``host.cancel``): it stays resumable.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from a2a.helpers import new_data_part, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.utils.errors import InvalidParamsError

from agent_fleet.control.host import FleetHost
from agent_fleet.control.teams import Caller
from agent_fleet.control.views import run_detail, run_results
from agent_fleet.domain.events import EventType
from agent_fleet.engine import load_run
from agent_fleet.errors import FleetError
from agent_fleet.integrations.a2a.jsonrpc import CALLER_STATE
from agent_fleet.integrations.a2a.task_input import BudgetAsk, run_request
from agent_fleet.options import budget_event_data

__all__ = ["MAX_RESULTS", "FleetExecutor"]

_logger = logging.getLogger(__name__)

MAX_RESULTS = 10_000  # results in the task's artifact; the rest: GET /v1/runs/{id}/results


class FleetExecutor(AgentExecutor):
    """Runs each A2A task as a run of ``host``; remembers which run each task started."""

    def __init__(self, host: FleetHost) -> None:
        self.host = host
        self.runs: dict[str, str] = {}  # task id → run id
        self._cancelled: set[str] = set()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        caller = context.call_context.state.get(CALLER_STATE)
        if not isinstance(caller, Caller) or context.message is None:
            raise InvalidParamsError(message="no authenticated caller or no message")
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        run_id = self.runs.get(task.id)
        try:
            if run_id is None:
                run_id = await self._submit(context, caller)
                self.runs[task.id] = run_id
            else:
                await self._raise_and_resume(run_id, BudgetAsk(context))
        except FleetError as exc:
            reply = updater.new_agent_message([new_text_part(str(exc))])
            if run_id is None:
                await updater.reject(reply)
            else:  # a paused run whose raise did not take: it still waits for one
                await updater.requires_input(reply)
            return
        text = f"run {run_id} is running: GET /v1/runs/{run_id} for its live figures"
        await updater.start_work(updater.new_agent_message([new_text_part(text)], metadata={"run_id": run_id}))
        await self.host.wait(run_id)
        if task.id not in self._cancelled:
            await self._finish(updater, run_id)

    async def _submit(self, context: RequestContext, caller: Caller) -> str:
        """The message's run, submitted as ``POST /v1/runs`` submits one (the same checks, the same words)."""
        body = run_request(context)
        return await self.host.submit(body.options(), caller, items=body.items)

    async def _raise_and_resume(self, run_id: str, ask: BudgetAsk) -> None:
        """New caps for every session of the run (as ``POST /v1/runs/{id}/budget``), then the run goes on."""
        data = budget_event_data(ask.tokens, ask.usd)
        log = self.host.engine.log
        self.host.run_budget_raise(run_id, [s.session_id for s in await log.list_sessions(run_id)], data)
        await log.emit_event(run_id, EventType.BUDGET_RAISED, data)
        if not self.host.active(run_id):
            await self.host.resume(run_id)

    async def _finish(self, updater: TaskUpdater, run_id: str) -> None:
        options, _plan = await load_run(self.host.engine.log, run_id)
        detail = await run_detail(self.host, run_id, options)
        summary: dict[str, Any] = detail.get("summary") or {}
        status = str(summary.get("status") or detail["status"])
        error = self.host.failures.get(run_id)
        if error is None and status in ("completed", "partial", "paused"):
            results = await run_results(self.host, run_id, options, 0, MAX_RESULTS)
            # one id per artifact of the run: a run that goes on after a pause replaces them
            await updater.add_artifact(
                [new_data_part(_json(detail))], artifact_id=f"{run_id}.run", name="run", metadata={"run_id": run_id}
            )
            await updater.add_artifact(
                [new_data_part(_json({k: results[k] for k in ("run_id", "final", "total", "results")}))],
                artifact_id=f"{run_id}.results",
                name="results",
                metadata={"run_id": run_id},
            )
        line = _line(run_id, status, summary, error)
        reply = updater.new_agent_message([new_text_part(line)], metadata={"run_id": run_id, "status": status})
        if error is not None or status not in ("completed", "partial", "paused"):
            await updater.failed(reply)
        elif status == "paused":
            await updater.requires_input(reply)
        else:
            await updater.complete(reply)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or ""
        run_id = self.runs.get(task_id)
        if run_id is not None and self.host.active(run_id):
            self._cancelled.add(task_id)
            self.host.cancel(run_id)
        updater = TaskUpdater(event_queue, task_id, context.context_id or "")
        text = f"run {run_id} was stopped: POST /v1/runs/{run_id}/resume continues it" if run_id else "cancelled"
        await updater.cancel(updater.new_agent_message([new_text_part(text)]))


def _line(run_id: str, status: str, summary: dict[str, Any], error: str | None) -> str:
    if error is not None:
        return f"run {run_id} failed: {error}"
    if status == "paused":
        return (
            f"run {run_id} paused: sessions reached their budget. Reply on this task with "
            '{"budget_tokens": N} or {"budget_usd": "X"} to raise it and go on.'
        )
    if status not in ("completed", "partial"):
        return f"run {run_id} ended {status}: POST /v1/runs/{run_id}/resume continues it"
    return (
        f"run {run_id} {status}: {summary.get('results_unique', 0)} unique results of "
        f"{summary.get('results_raw', 0)}, {summary.get('partitions', 0)} sessions, "
        f"${summary.get('cost_usd', 0)}"
    )


def _json(data: Any) -> Any:
    """As the REST API answers it (``google.protobuf.Value`` takes only JSON's types)."""
    return json.loads(json.dumps(data, default=str))
