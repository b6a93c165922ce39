"""CLI agents as fleet sessions (``deploy --agent-cmd CMD``; SPEC.md "CLI agents").

One attempt is one run of the command in a fresh sandbox (a :class:`~agent_fleet.hands.port.CliAgent`:
:class:`~agent_fleet.hands.cli_agents.CommandAgent` in a run), pointed at the run's gateway service with
the session's own token — never a provider key. What the session log records:

* ``session_started`` / ``session_resumed`` ``{attempt, agent: "cli", worker}``;
* one ``model_response`` per model call the gateway served to the session's token, carrying the
  usage and list-price cost the gateway metered. :class:`CallRecorder` writes it before the CLI gets
  its answer, so spend survives a crash, and the run summary and budgets count CLI agents exactly
  like built-in ones (the summary is folded from the log);
* on success, the result items, the session's ``change`` (what it changed in its worktree, in a run
  that keeps changes) and ``session_completed`` ``{summary, results, exit_code, reported}`` in one
  atomic append (``reported`` is the usage and cost the CLI printed itself). A failed
  attempt records no result, so a reassigned session is never run twice to completion;
* a call refused on budget: the command is stopped (it gets a moment to exit by itself, so a CLI
  that retries is not left hammering the gateway) and ``session_paused`` ``{reason: "budget"}``;
* an attempt that did not complete (paused, preempted, timed out, failed) records ``cli_state``: the
  tool's own session id and conversation files (:mod:`~agent_fleet.hands.cli_state`). The next attempt
  reads the last one back and **continues** that conversation (``claude --resume``, ``codex exec
  resume``, aider's restored chat history), with what the session spent so far still counted.

A CLI that outlives its hard timeout is killed (its whole process group) and the attempt ends in
``TimeoutError``, so the dispatcher reassigns the session; no sandbox means the worker failed
(reassigned too); a non-zero exit or an error the CLI reported (an API or authentication error
that exited 0 too) is :class:`AttemptFailed`, its message ending in the tail of the command's
stderr, which is also logged as a warning (the console's line). A refused credential (the tool
reports a 401 or an authentication error) fails the session at once (``kind: config``): another
attempt would be refused alike.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

from agent_fleet.brain.port import SessionView
from agent_fleet.dispatch.runner import Attempt, AttemptFailed
from agent_fleet.domain.accounts import AccountScope
from agent_fleet.domain.attempts import AttemptKind
from agent_fleet.domain.decode import decode_as
from agent_fleet.domain.events import Event, EventType
from agent_fleet.domain.model import ChatResponse
from agent_fleet.domain.outcomes import Outcome, SessionOutcome
from agent_fleet.domain.payloads import CliState as CliStateRecorded
from agent_fleet.domain.usage import Usage
from agent_fleet.hands.port import CliAgent, CliOutcome, CliState, GatewayAccess
from agent_fleet.session.port import SessionLog

__all__ = ["CallRecorder", "CliSessions", "GatewayEndpoint", "last_cli_state"]

log = logging.getLogger(__name__)


class _Metered(Protocol):
    @property
    def usage(self) -> Usage: ...

    cost_usd: Decimal
    calls: int


class _Meter(Protocol):
    def session_usage(self, session_id: str) -> _Metered: ...


class _Tokens(Protocol):
    def revoke(self, session_id: str) -> None: ...


class GatewayEndpoint(Protocol):
    """The gateway service as CLI sessions need it (``spend.service.GatewayService``)."""

    root_url: str

    @property
    def tokens(self) -> _Tokens: ...

    def issue(self, session_id: str, *, queue: str | None = None) -> str: ...


def _minus(a: Usage, b: Usage) -> Usage:
    return Usage(
        a.input_tokens - b.input_tokens,
        a.output_tokens - b.output_tokens,
        a.cached_input_tokens - b.cached_input_tokens,
        a.cache_write_tokens - b.cache_write_tokens,
    )


@dataclass(slots=True)
class _Tap:
    """What has been recorded of one session's metered spend."""

    usage: Usage
    cost: Decimal
    calls: int
    turns: int
    refused: dict[str, Any] | None = None
    errors: int = field(default=0)
    stop: asyncio.Event = field(default_factory=asyncio.Event)  # set at the first budget refusal


class CallRecorder:
    """The gateway service's ``on_call`` observer for CLI sessions.

    Invariant: the ``model_response`` events of a session add up to what the gateway metered for
    it since its tap was opened (a call's share is the meter's growth since the previous record).
    """

    def __init__(self, log: SessionLog, meter: _Meter) -> None:
        self._log = log
        self._meter = meter
        self._taps: dict[str, _Tap] = {}

    def open(self, session_id: str, *, turns: int) -> _Tap:
        """Start (or continue) recording a session; the meter as it is now is the baseline."""
        tap = self._taps.get(session_id)
        if tap is None:
            m = self._meter.session_usage(session_id)
            tap = self._taps[session_id] = _Tap(m.usage, m.cost_usd, m.calls, turns)
        tap.refused = None
        tap.stop = asyncio.Event()
        return tap

    async def __call__(self, session_id: str, outcome: dict[str, Any]) -> None:
        tap = self._taps.get(session_id)
        if tap is None:
            return
        kind = outcome.get("outcome")
        if kind == "budget_exhausted":
            scope = outcome.get("scope", AccountScope.SESSION)
            tap.refused = {"scope": scope, "detail": str(outcome.get("message", ""))}
            tap.stop.set()
            return
        if kind == "error":
            data = {
                "turn": tap.turns + 1,
                "error": str(outcome.get("message", "")),
                "kind": str(outcome.get("error", "")),
                "retried": [str(k) for k in outcome.get("retried", ())],
                "model": str(outcome.get("model", "")),
                "source": "gateway",
            }
            await self._log.emit_event(session_id, EventType.MODEL_ERROR, data)
            return
        m = self._meter.session_usage(session_id)
        usage, cost, calls = _minus(m.usage, tap.usage), m.cost_usd - tap.cost, m.calls - tap.calls
        if calls <= 0 and usage.total_tokens == 0:
            return
        tap.usage, tap.cost, tap.calls = m.usage, m.cost_usd, m.calls
        tap.turns += 1
        retried = tuple(str(k) for k in outcome.get("retried", ()))
        response = ChatResponse(None, (), usage, "stop", str(outcome.get("model", "")), cost_usd=cost, retried=retried)
        data = {"turn": tap.turns, "response": response.to_dict(), "source": "gateway", "calls": calls}
        await self._log.emit_event(session_id, EventType.MODEL_RESPONSE, data)


class CliSessions:
    """A :data:`~agent_fleet.dispatch.runner.SessionBody` that runs each session as a CLI agent."""

    def __init__(self, agent: CliAgent, *, endpoint: GatewayEndpoint, recorder: CallRecorder) -> None:
        self.agent = agent
        self._endpoint = endpoint
        self._recorder = recorder

    async def __call__(self, attempt: Attempt) -> SessionOutcome:
        sid = attempt.session_id
        woken = (await attempt.log.wake(sid)).events
        view = SessionView.from_events(woken)
        if view.state.terminal:
            return SessionOutcome(sid, Outcome(view.state.value))
        attempt.gateway.restore_spent(sid, view.usage, view.cost_usd)
        tap = self._recorder.open(sid, turns=view.turn)
        begin = EventType.SESSION_RESUMED if view.started else EventType.SESSION_STARTED
        await attempt.log.emit_event(
            sid, begin, {"attempt": attempt.number, "agent": "cli", "worker": attempt.lease.worker_id}
        )
        root = self._endpoint.root_url
        access = GatewayAccess(openai_base_url=root + "/v1", anthropic_base_url=root, token=self._endpoint.issue(sid))
        resume = last_cli_state(woken)
        kept: list[CliState] = []
        try:
            with attempt.progress.bounded_wait():
                out = await self.agent.run(
                    session_id=sid,
                    partition=view.partition,
                    task=view.task,
                    gateway=access,
                    resume=resume,
                    stop=tap.stop,
                    keep=kept.append,
                )
        except asyncio.CancelledError:
            if kept:  # preempted or moved: the next attempt continues from here
                await asyncio.shield(attempt.log.emit_event(sid, EventType.CLI_STATE, kept[-1].to_dict()))
            raise
        finally:
            self._endpoint.tokens.revoke(sid)  # nothing the command left behind can spend more
        if tap.refused is not None:
            await self._keep(attempt, out)
            paused = {"reason": "budget", **tap.refused}
            await attempt.log.emit_event(sid, EventType.SESSION_PAUSED, paused)
            return SessionOutcome(sid, Outcome.PAUSED, "budget")
        if not out.ok:
            await self._keep(attempt, out)
            log.warning("%s attempt %d: the CLI agent %s", sid, attempt.number, out.error)
            if out.timed_out:
                raise TimeoutError(out.error or "the CLI agent timed out")
            kind = AttemptKind.CONFIG if out.auth_failed else AttemptKind.AGENT  # a refused key fails at once
            raise AttemptFailed(f"the CLI agent {out.error}", kind=kind)
        reported: dict[str, Any] = {"usage": out.usage.to_dict()}
        if out.cost_usd is not None:
            reported["cost_usd"] = str(out.cost_usd)
        events: list[tuple[str, dict[str, Any]]] = [(EventType.RESULT_ITEM, item.to_dict()) for item in out.items]
        if out.change is not None:
            events.append((EventType.CHANGE, out.change))
        done = {
            "summary": f"CLI agent reported {len(out.items)} result(s)",
            "results": len(out.items),
            "exit_code": out.exit_code,
            "reported": reported,
            "cli_session_id": out.cli_session_id,
            "continued": resume is not None,
        }
        events.append((EventType.SESSION_COMPLETED, done))
        await attempt.log.emit_events(sid, events)
        return SessionOutcome(sid, Outcome.COMPLETED)

    @staticmethod
    async def _keep(attempt: Attempt, out: CliOutcome) -> None:
        if out.state is not None:
            await attempt.log.emit_event(attempt.session_id, EventType.CLI_STATE, out.state.to_dict())


def last_cli_state(events: list[Event] | tuple[Event, ...]) -> CliState | None:
    """What the session's last unfinished attempt left of the CLI's conversation, if anything."""
    for ev in reversed(events):
        recorded = decode_as(ev, CliStateRecorded)
        if recorded is not None:
            return CliState.from_dict(dict(recorded.record))
    return None
