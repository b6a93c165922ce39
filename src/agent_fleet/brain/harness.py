"""The stateless harness: wake a session from its log and run its tool-using loop.

The harness holds nothing it could not rebuild: every step is decided by
:func:`~agent_fleet.brain.step.next_action` over a :class:`SessionView` folded from the log, and
every effect is recorded before the next decision. After a crash a new harness calls ``wake``:

* a model call with a recorded request and no recorded response is sent again (nothing else is).
  The provider may have answered and billed the send that was lost, so first a ``model_resent``
  event charges it at its reservation (the gateway's :meth:`unanswered_charge`); the session's
  budget is restored with it. A send whose fate is known (answered with an error, refused by the
  budget) is not charged, and a second wake before the call went out again charges nothing more;
* a tool whose result was recorded is never run again. ``submit_result`` records its call, its
  result items and its tool result in one atomic append, so a result is never recorded twice.
  Hands that keep state across tool calls (a workspace's edits) are handed the session's earlier
  successful calls before this attempt runs one (:class:`~agent_fleet.hands.port.Replays`).

When the session's hands keep a workspace of a repository (a run that keeps changes), what the
session changed there is captured as it completes and recorded in the same append as
``session_completed`` (a ``change`` event): a completed session has its change in its log, once.

A model call is sent while its request event is being written (the response is recorded only
after the request is durable), and a session's start is written in the same append as its first
request: the call does not wait for a commit, and a crash before the commit leaves the turn
unrecorded, so ``wake`` sends it as a fresh call, which is what it was.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from agent_fleet.brain.context import Fitted, Summary, compaction_request, fit
from agent_fleet.brain.protocol import (
    FINISH,
    SUBMIT_RESULT,
    ToolArgumentError,
    finding_key,
    parse_arguments,
    parse_result_items,
)
from agent_fleet.brain.step import CallModel, Complete, Limits, Pause, RunTool, next_action
from agent_fleet.brain.view import SessionView
from agent_fleet.domain.decode import decode
from agent_fleet.domain.error_kinds import error_kind
from agent_fleet.domain.events import Event, EventType
from agent_fleet.domain.model import ChatRequest, ToolCall
from agent_fleet.domain.outcomes import Outcome, SessionOutcome
from agent_fleet.domain.payloads import ToolCalled, ToolResult
from agent_fleet.domain.results import ResultItem
from agent_fleet.errors import BudgetExhausted, ProviderError, UnreachableError
from agent_fleet.hands.port import ChangeSource, Hands, Replays
from agent_fleet.session.port import SessionLog
from agent_fleet.spend.port import ModelGateway

__all__ = ["Harness", "Outcome", "SessionOutcome"]  # the outcomes are domain values, named here too


class Harness:
    """Runs one session at a time; cheap to create, safe to lose."""

    def __init__(self, *, log: SessionLog, gateway: ModelGateway, hands: Hands, limits: Limits | None = None) -> None:
        self._log = log
        self._gateway = gateway
        self._hands = hands
        self._limits = limits or Limits()
        self._tools = (SUBMIT_RESULT, FINISH, *hands.specs())
        self._hand_tools = frozenset(s.name for s in hands.specs())

    async def run(self, session_id: str, *, attempt: int = 1) -> SessionOutcome:
        woken: tuple[Event, ...] | None
        woken = (await self._log.wake(session_id)).events
        guard = self._limits.guard() if self._limits.guard is not None else None
        view = SessionView.from_events(woken, guard=guard)
        if view.state.terminal:
            return SessionOutcome(session_id, Outcome(view.state.value))
        action = next_action(view, self._limits)  # the start and resent events do not change the decision
        if isinstance(action, CallModel) and action.reissue and view.unbilled_send:
            await self._charge_unanswered(view, action)
        self._gateway.restore_spent(session_id, *view.spent)
        if isinstance(self._hands, Replays):
            self._hands.replay(_succeeded_calls(woken))
        # The view is all the attempt keeps: the events it was folded from stay in the log alone.
        woken = None
        begin = (EventType.SESSION_RESUMED if view.started else EventType.SESSION_STARTED, {"attempt": attempt})
        lead: list[tuple[str, dict[str, Any]]] = [begin]
        if not (isinstance(action, CallModel) and not action.reissue):
            await self._emit(view, *begin)
            lead = []
        while True:
            if action is None:
                return SessionOutcome(session_id, Outcome(view.state.value))
            if isinstance(action, CallModel):
                paused = await self._call_model(view, action, lead)
                lead = []
                if paused is not None:
                    return paused
            elif isinstance(action, RunTool):
                await self._run_tool(view, action.call)
            elif isinstance(action, Complete):
                events: list[tuple[str, dict[str, Any]]] = []
                if action.text_result:
                    item = self._result(
                        view, view.results, {"title": action.text_result[:120], "body": action.text_result}
                    )
                    events.append((EventType.RESULT_ITEM, item))
                results = view.results + len(events)
                events += await self._change()
                events.append(_completed(action.summary, results, reason=action.reason))
                await self._emit_many(view, events)
                return SessionOutcome(session_id, Outcome.COMPLETED)
            elif isinstance(action, Pause):
                data = {"reason": action.reason}
                if view.trip is not None:
                    data["message"] = view.trip.message
                await self._emit(view, EventType.SESSION_PAUSED, data)
                return SessionOutcome(session_id, Outcome.PAUSED, action.reason)
            action = next_action(view, self._limits)

    def _fit(self, view: SessionView) -> Fitted:
        return fit(
            view.messages,
            self._tools,
            model=view.model,
            max_tokens=view.max_tokens,
            care=self._limits.context,
            summary=view.summary,
            factor=view.prompt_factor,
        )

    def _request(self, view: SessionView, fitted: Fitted | None = None) -> ChatRequest:
        messages = (fitted or self._fit(view)).messages
        return ChatRequest(
            model=view.model,
            messages=messages,
            tools=self._tools,
            max_tokens=view.max_tokens,
            temperature=view.temperature,
            seed=view.seed,
            tool_choice=view.tool_choice,
        )

    async def _charge_unanswered(self, view: SessionView, action: CallModel) -> None:
        """The request's last send may have been answered (and billed) by the provider before the crash:
        record it at its reservation, durably, before it is sent again; the budget is restored with it."""
        usage, cost = self._gateway.unanswered_charge(self._request(view))
        data = {"turn": action.turn, "usage": usage.to_dict(), "tokens": usage.total_tokens, "cost_usd": str(cost)}
        await self._emit(view, EventType.MODEL_RESENT, data)

    async def _call_model(
        self, view: SessionView, action: CallModel, lead: list[tuple[str, dict[str, Any]]]
    ) -> SessionOutcome | None:
        fitted = self._fit(view)
        if fitted.compact is not None:
            if lead:
                await self._emit_many(view, lead)
                lead = []
            paused = await self._compact(view, action, fitted)
            if paused is not None:
                return paused
            fitted = self._fit(view)
        request = self._request(view, fitted)
        # the raw estimate of what is sent: the answer's count of prompt tokens calibrates the next fits
        if not action.reissue:
            events = [*lead, (EventType.MODEL_REQUEST, {"turn": action.turn, "estimate": fitted.estimate})]
        elif view.unbilled_send:
            events = lead  # the charged re-send (model_resent) already marks this send's fate as unknown
        else:
            # sent again after an answered error or a charged timeout: this send's fate is unknown until
            # its answer is recorded (a crash now is charged on wake, as for a first send)
            again = {"turn": action.turn, "again": True, "estimate": fitted.estimate}
            events = [*lead, (EventType.MODEL_REQUEST, again)]
        recording = asyncio.ensure_future(self._log.emit_events(view.session_id, events))
        try:
            response = await self._gateway.complete(view.session_id, request)
        except BudgetExhausted as exc:
            await self._recorded(view, recording)
            await self._emit(
                view, EventType.SESSION_PAUSED, {"reason": "budget", "scope": exc.scope, "detail": str(exc)}
            )
            return SessionOutcome(view.session_id, Outcome.PAUSED, "budget")
        except (ProviderError, UnreachableError) as exc:
            await self._recorded(view, recording)
            await self._emit_many(view, [*_charged(exc, action.turn), _failed(exc, action.turn, view.model)])
            raise
        except BaseException:
            recording.cancel()  # the turn may stay unrecorded: wake sends it as a fresh call
            raise
        await self._recorded(view, recording)
        await self._emit(view, EventType.MODEL_RESPONSE, {"turn": action.turn, "response": response.to_dict()})
        return None

    async def _compact(self, view: SessionView, action: CallModel, fitted: Fitted) -> SessionOutcome | None:
        """Summarise the older turns with one metered model call and record it before the turn is sent."""
        assert fitted.compact is not None
        care, (start, end) = self._limits.context, fitted.compact
        factor = view.prompt_factor
        request = compaction_request(
            view.messages, fitted.compact, model=view.model, care=care, summary=view.summary, factor=factor
        )
        # the run's settings go on this call as on every other: its output limit too, when lower than the summary's
        limit = min(request.max_tokens, view.max_tokens) if view.max_tokens > 0 else request.max_tokens
        request = replace(request, temperature=view.temperature, seed=view.seed, max_tokens=limit)
        try:
            response = await self._gateway.complete(view.session_id, request)
        except BudgetExhausted as exc:
            paused = {"reason": "budget", "scope": exc.scope, "detail": str(exc)}
            await self._emit(view, EventType.SESSION_PAUSED, paused)
            return SessionOutcome(view.session_id, Outcome.PAUSED, "budget")
        except (ProviderError, UnreachableError) as exc:
            error = {**_model_error(exc, action.turn, view.model), "compaction": True}  # the summary call failed
            await self._emit_many(view, [*_charged(exc, action.turn, compaction=True), (EventType.MODEL_ERROR, error)])
            raise
        text = (response.content or "").strip()
        after = fit(
            view.messages,
            self._tools,
            model=view.model,
            max_tokens=view.max_tokens,
            care=care,
            summary=Summary(start, end, text),
            factor=factor,
        )
        data: dict[str, Any] = {
            "turn": action.turn,
            "from_turn": start,
            "through_turn": end,
            "summary": text,
            "response": response.to_dict(),
            "tokens": response.usage.total_tokens,
            "tokens_before": math.ceil(fitted.estimate * factor),  # as the server would count them
            "tokens_after": math.ceil(after.estimate * factor),
        }
        await self._emit(view, EventType.CONTEXT_COMPACTED, data)
        return None

    @staticmethod
    async def _recorded(view: SessionView, recording: asyncio.Future[list[Event]]) -> None:
        """Wait for events written beside a model call, then fold them into the view in order."""
        for ev in await recording:
            view.apply(ev)

    async def _run_tool(self, view: SessionView, call: ToolCall) -> None:
        start = (EventType.TOOL_CALL, {"call_id": call.id, "name": call.name, "arguments": call.arguments})
        try:
            args = parse_arguments(call.arguments)
            if call.name == SUBMIT_RESULT.name:
                await self._submit(view, call, start, parse_result_items(args))
                return
            if call.name == FINISH.name:
                result = self._tool_result(call, "session finished")
                summary = result[1]["summary"] = str(args.get("summary", ""))[:2000]
                events = [start, result]
                if [c.id for c in view.open_calls] == [call.id]:
                    # The last call of its turn: the session is complete (next_action's Complete), in
                    # the same append — one write fewer per session, the same events.
                    events += await self._change()
                    events.append(_completed(summary, view.results))
                await self._emit_many(view, events)
                return
        except ToolArgumentError as exc:
            await self._emit_many(view, [start, self._malformed(call, f"error: {exc}")])
            return
        if call.name not in self._hand_tools:
            await self._emit_many(view, [start, self._malformed(call, f"error: unknown tool {call.name!r}")])
            return
        if call.id not in view.started_calls:
            await self._emit(view, *start)
        out = await self._hands.execute(call.name, args)
        await self._emit(view, *self._tool_result(call, out.output, out.is_error))

    async def _submit(
        self, view: SessionView, call: ToolCall, start: tuple[str, dict[str, Any]], items: list[dict[str, Any]]
    ) -> None:
        """Record a ``submit_result``: its call, each finding no earlier call of the session submitted, and its
        tool result, in one append. A finding an earlier call submitted is not recorded again. After a first
        accepted submission, a call that brings nothing new (every finding was submitted before, or none is
        given) ends the session: the model is repeating itself and its results are in, so the session
        completes as after ``finish``, its end saying why (``repeated_submission``)."""
        events: list[tuple[str, dict[str, Any]]] = [start]
        new = 0
        for item in items:
            record = self._result(view, view.results + new, item)
            if finding_key(record) not in view.submitted:  # (the same finding twice in one call: both count)
                events.append((EventType.RESULT_ITEM, record))
                new += 1
        again = len(items) - new
        if view.submissions and not new:
            said = f"the {again} result(s) were submitted before" if items else "no result given"
            result = self._tool_result(call, f"nothing new ({said}): finished")
            result[1]["repeated"] = True
            events.append(result)
            if [c.id for c in view.open_calls] == [call.id]:  # the last call of its turn, as for finish
                events += await self._change()
                events.append(_completed("", view.results, reason="repeated_submission"))
        else:
            note = f"; {again} submitted before, not recorded again" if again else ""
            events.append(self._tool_result(call, f"accepted {new} result(s){note}"))
        await self._emit_many(view, events)

    async def _change(self) -> list[tuple[str, dict[str, Any]]]:
        """The session's ``change`` event, as its workspace is now (none without one, or no change)."""
        hands = self._hands
        data = await hands.change() if isinstance(hands, ChangeSource) else None
        return [(EventType.CHANGE, data)] if data is not None else []

    @staticmethod
    def _tool_result(call: ToolCall, output: str, is_error: bool = False) -> tuple[str, dict[str, Any]]:
        return (EventType.TOOL_RESULT, {"call_id": call.id, "name": call.name, "output": output, "is_error": is_error})

    @classmethod
    def _malformed(cls, call: ToolCall, output: str) -> tuple[str, dict[str, Any]]:
        """A call the tool could not accept (bad arguments, unknown tool): a quality signal of the model."""
        result = cls._tool_result(call, output, is_error=True)
        result[1]["malformed"] = True
        return result

    @staticmethod
    def _result(view: SessionView, n: int, item: dict[str, Any]) -> dict[str, Any]:
        extra = {k: v for k, v in item.items() if k not in ("title", "body", "category", "confidence", "location")}
        return ResultItem(
            id=f"{view.session_id}.r{n:04d}",
            partition_id=view.partition.id,
            session_id=view.session_id,
            title=item["title"],
            body=item["body"],
            category=item.get("category"),
            confidence=item.get("confidence"),
            location=item.get("location"),
            extra=extra,
        ).to_dict()

    async def _emit(self, view: SessionView, type: str, data: dict[str, Any]) -> Event:
        ev = await self._log.emit_event(view.session_id, type, data)
        view.apply(ev)
        return ev

    async def _emit_many(self, view: SessionView, events: list[tuple[str, dict[str, Any]]]) -> None:
        for ev in await self._log.emit_events(view.session_id, events):
            view.apply(ev)


def _completed(summary: str, results: int, *, reason: str | None = None) -> tuple[str, dict[str, Any]]:
    data: dict[str, Any] = {"summary": summary, "results": results}
    if reason is not None:
        data["reason"] = reason  # how a session that did not call finish ended
    return (EventType.SESSION_COMPLETED, data)


def _charged(exc: BaseException, turn: int, *, compaction: bool = False) -> list[tuple[str, dict[str, Any]]]:
    """A call that timed out after it was sent may have been processed and billed: the gateway charged
    it at its reservation (``exc.charged``) and the log records that charge as a re-sent call (as after
    a crash), so the run's figures and the session's budget hold it when the turn is sent again."""
    charged = getattr(exc, "charged", None)
    if charged is None:
        return []
    usage, cost = charged
    data = {"turn": turn, "usage": usage.to_dict(), "tokens": usage.total_tokens, "cost_usd": str(cost)}
    data["cause"] = str(error_kind(exc))
    if compaction:
        data["compaction"] = True
    return [(EventType.MODEL_RESENT, data)]


def _failed(exc: BaseException, turn: int, model: str) -> tuple[str, dict[str, Any]]:
    return (EventType.MODEL_ERROR, _model_error(exc, turn, model))


def _model_error(exc: BaseException, turn: int, model: str) -> dict[str, Any]:
    """A failed model call as its ``model_error`` event records it."""
    return {
        "turn": turn,
        "error": str(exc),
        "status": getattr(exc, "status", 0),
        "kind": str(error_kind(exc)),
        "retried": [str(k) for k in getattr(exc, "retried", ())],
        "model": str(getattr(exc, "model", "") or model),
    }


def _succeeded_calls(events: Sequence[Event]) -> list[tuple[str, dict[str, Any]]]:
    """The session's tool calls whose recorded result is not an error, in the order they ran."""
    started: dict[str, tuple[str, Any]] = {}
    done: list[tuple[str, dict[str, Any]]] = []
    for ev in events:
        p = decode(ev)
        if isinstance(p, ToolCalled):
            started[p.call_id] = (p.name, p.arguments)
        elif isinstance(p, ToolResult) and not p.is_error:
            call = started.pop(p.call_id, None)
            if call is None:
                continue
            raw = call[1]
            try:
                done.append((call[0], raw if isinstance(raw, dict) else parse_arguments(str(raw or ""))))
            except ToolArgumentError:
                continue
    return done
