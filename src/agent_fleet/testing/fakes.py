"""Fakes for the engine's ports, for tests of code that calls them (the paid-model boundary, tools).

* :class:`FakeProvider` — a :class:`~agent_fleet.spend.port.ModelProvider` below the gateway:
  answers from a script, takes ``latency`` seconds of an injected clock, counts what it served.
* :class:`FakeGateway` — a :class:`~agent_fleet.spend.port.ModelGateway` for the brain and the
  dispatcher: answers from a script, can hold a session's calls, refuse on budget or fail.
* :class:`FakeHands` — :class:`~agent_fleet.hands.port.Hands` with scripted tools (or wrapping real
  hands), recording every call.
* The session log is :class:`agent_fleet.session.memory.MemorySessionLog`; the clock is
  :class:`agent_fleet.clock.VirtualClock` (``auto_advance`` runs it on its own).

A script step is a response, an exception to raise, or a function of the request.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from agent_fleet.clock import Clock, RealClock
from agent_fleet.domain.model import ChatRequest, ChatResponse, ToolCall, ToolSpec
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import BudgetExhausted
from agent_fleet.hands.port import Hands, ToolOutput

__all__ = ["FakeGateway", "FakeHands", "FakeProvider", "finish_call", "submit_then_finish", "tool_call", "turn_of"]

Step = BaseException | ChatResponse | Callable[[ChatRequest], ChatResponse]
Script = Callable[[str, ChatRequest], ChatResponse | Awaitable[ChatResponse]]


def turn_of(request: ChatRequest) -> int:
    """Which turn of its session a request is (1 for the first model call)."""
    return sum(1 for m in request.messages if m["role"] == "assistant") + 1


def tool_call(name: str, arguments: Mapping[str, Any], call_id: str) -> ToolCall:
    return ToolCall(call_id, name, json.dumps(dict(arguments)))


def finish_call(session_id: str, usage: Usage | None = None) -> ChatResponse:
    call = tool_call("finish", {"summary": "done"}, f"f-{session_id}")
    return ChatResponse(None, (call,), usage or Usage(10, 5))


def submit_then_finish(session_id: str, request: ChatRequest) -> ChatResponse:
    """The smallest agent: turn 1 submits one result, turn 2 finishes."""
    if turn_of(request) == 1:
        items = {"items": [{"title": f"result of {session_id}", "body": "found"}]}
        return ChatResponse(None, (tool_call("submit_result", items, f"s-{session_id}"),), Usage(10, 5))
    return finish_call(session_id)


@dataclass
class FakeProvider:
    """A model provider: the next scripted step per call, else ``ok`` with ``usage``."""

    clock: Clock = field(default_factory=RealClock)
    name: str = "fake"
    model: str = "gpt-4.1-mini"
    latency: float = 0.0
    usage: Usage = field(default_factory=lambda: Usage(100, 20))
    script: list[Step] = field(default_factory=list)
    calls: int = 0
    active: int = 0
    peak: int = 0  # most calls in flight at once
    closed: int = 0
    on_signals: Callable[[str, Any], None] | None = None  # the gateway's rate-signal hook, if it sets one

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.calls += 1
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            if self.latency:
                await self.clock.sleep(self.latency)
            step: Step | None = self.script.pop(0) if self.script else None
            if isinstance(step, BaseException):
                raise step
            if isinstance(step, ChatResponse):
                return step
            if step is not None:
                return step(request)
            return ChatResponse(content="ok", usage=self.usage, model=request.model or self.model)
        finally:
            self.active -= 1

    async def aclose(self) -> None:
        self.closed += 1


class FakeGateway:
    """A model gateway answering ``script(session_id, request)``.

    ``replies`` are served first, in order (a response, or an exception to raise); ``hold[sid]``
    makes that session's calls wait until the event is set (a call in flight); ``refuse_after``
    raises :class:`BudgetExhausted` once that many calls were answered; ``latency`` seconds of
    ``clock`` pass in every call. ``calls`` lists every call that reached the model, as it
    arrives (one that is held is in flight), ``finished_at`` when each session was told to finish.
    """

    def __init__(
        self,
        script: Script = submit_then_finish,
        *,
        clock: Clock | None = None,
        latency: float = 0.0,
        replies: Sequence[ChatResponse | BaseException] = (),
    ) -> None:
        self.script = script
        self.clock = clock or RealClock()
        self.latency = latency
        self.replies: list[ChatResponse | BaseException] = list(replies)
        self.hold: dict[str, asyncio.Event] = {}
        self.refuse_after: int | None = None
        self.calls: list[tuple[str, ChatRequest]] = []
        self.refused = 0
        self.restored: dict[str, tuple[Usage, Decimal]] = {}
        self.unanswered_prompt = 100
        self.finished_at: dict[str, float] = {}

    @property
    def requests(self) -> list[ChatRequest]:
        """Each call's request, in order of arrival."""
        return [request for _, request in self.calls]

    @property
    def sessions(self) -> list[str]:
        """The session of each call, in order of arrival."""
        return [sid for sid, _ in self.calls]

    async def complete(self, session_id: str, request: ChatRequest) -> ChatResponse:
        if self.refuse_after is not None and len(self.calls) >= self.refuse_after:
            self.refused += 1
            raise BudgetExhausted("session token budget reached", scope="session")
        self.calls.append((session_id, request))
        gate = self.hold.get(session_id)
        if gate is not None:
            await gate.wait()
        if self.latency:
            await self.clock.sleep(self.latency)
        if self.replies:
            reply = self.replies.pop(0)
            if isinstance(reply, BaseException):
                raise reply
        else:
            answer = self.script(session_id, request)
            reply = await answer if inspect.isawaitable(answer) else answer
        if any(c.name == "finish" for c in reply.tool_calls):
            self.finished_at[session_id] = self.clock.now()
        return reply

    def restore_spent(self, session_id: str, usage: Usage, cost_usd: Decimal) -> None:
        self.restored[session_id] = (usage, cost_usd)

    def unanswered_charge(self, request: ChatRequest) -> tuple[Usage, Decimal]:
        """A fixed ``unanswered_prompt`` tokens of prompt plus the request's ``max_tokens``, free of charge."""
        return Usage(self.unanswered_prompt, request.max_tokens), Decimal(0)

    def __repr__(self) -> str:
        return f"FakeGateway(calls={len(self.calls)}, refused={self.refused}, queued={len(self.replies)})"


ToolHandler = Callable[[dict[str, Any]], ToolOutput | str | Awaitable[ToolOutput | str]]


class FakeHands:
    """Tools by name: a fixed output, or a handler of the input. With ``inner``, real hands answer
    instead (their specs and results) and this only records. Every call lands in ``executed``."""

    def __init__(self, tools: Mapping[str, str | ToolHandler] | None = None, *, inner: Hands | None = None) -> None:
        self.tools = dict(tools or {})
        self.inner = inner
        self.executed: list[tuple[str, dict[str, Any]]] = []
        self.closed = 0

    def specs(self) -> tuple[ToolSpec, ...]:
        if self.inner is not None:
            return self.inner.specs()
        schema = {"type": "object", "properties": {}}
        return tuple(ToolSpec(name, f"{name} (a fake tool)", schema) for name in sorted(self.tools))

    async def execute(self, name: str, input: dict[str, Any]) -> ToolOutput:
        self.executed.append((name, input))
        if self.inner is not None:
            return await self.inner.execute(name, input)
        tool = self.tools.get(name)
        if tool is None:
            return ToolOutput(f"error: unknown tool {name!r}", is_error=True)
        if isinstance(tool, str):
            return ToolOutput(tool)
        out = tool(input)
        result = await out if inspect.isawaitable(out) else out
        return result if isinstance(result, ToolOutput) else ToolOutput(str(result))

    async def aclose(self) -> None:
        self.closed += 1
        if self.inner is not None:
            await self.inner.aclose()

    def __repr__(self) -> str:
        return f"FakeHands(tools={sorted(self.tools)}, executed={len(self.executed)}, closed={self.closed})"
