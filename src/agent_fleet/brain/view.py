"""A session's state, rebuilt from its events alone.

:class:`SessionView` is a fold over the session's events: ``apply`` each event in order and the
view holds the conversation, the turn, the calls still owed a result, what was spent and whether
the session is done. The harness keeps nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

from agent_fleet.brain.context import Summary
from agent_fleet.brain.protocol import SYSTEM_PROMPT, first_user_message
from agent_fleet.domain.events import Event, EventType, SessionState, project_state
from agent_fleet.domain.model import ChatResponse, ToolCall
from agent_fleet.domain.plan import Partition
from agent_fleet.domain.usage import Usage

__all__ = ["GuardTrip", "SessionView", "TurnGuard"]


class GuardTrip(Protocol):
    @property
    def kind(self) -> str: ...

    @property
    def message(self) -> str: ...


class TurnGuard(Protocol):
    """Watches finished turns: their ``(tool name, arguments)`` calls and whether a result came."""

    def observe_turn(self, tool_calls: Iterable[tuple[str, str]], *, produced: bool = False) -> GuardTrip | None: ...


@dataclass
class SessionView:
    session_id: str
    run_id: str
    task: str
    partition: Partition
    model: str
    max_tokens: int
    messages: list[dict[str, Any]]
    state: SessionState = SessionState.CREATED
    turn: int = 0  # model responses recorded
    pending_turn: int | None = None  # a model_request with no response yet
    # the last send of the pending turn may have been answered and billed, and is not charged yet
    unbilled_send: bool = False
    resent_calls: int = 0  # sends of unknown fate charged at their reservation (model_resent)
    resent_usage: Usage = field(default_factory=Usage)
    resent_cost_usd: Decimal = Decimal(0)
    last_response: ChatResponse | None = None
    open_calls: list[ToolCall] = field(default_factory=list)  # calls of the last response owed a result
    results: int = 0  # result items recorded
    usage: Usage = field(default_factory=Usage)
    cost_usd: Decimal = Decimal(0)
    finished: bool = False
    started: bool = False
    last_seq: int = 0
    pause_reason: str | None = None
    finish_summary: str = ""
    started_calls: set[str] = field(default_factory=set)  # tool calls recorded as started
    guard: TurnGuard | None = None
    trip: GuardTrip | None = None  # the guard stopped the session
    summary: Summary | None = None  # the last context_compacted summary: the requests send it for its turns
    compactions: int = 0
    _turn_results_from: int = 0

    def _close_turn(self) -> None:
        """A turn ends when its last tool call has its result: tell the guard what it did."""
        if self.guard is None or self.last_response is None or self.trip is not None:
            return
        calls = [(c.name, c.arguments) for c in self.last_response.tool_calls]
        self.trip = self.guard.observe_turn(calls, produced=self.results > self._turn_results_from)

    @classmethod
    def from_events(cls, events: list[Event] | tuple[Event, ...], *, guard: TurnGuard | None = None) -> SessionView:
        if not events or events[0].type != EventType.SESSION_CREATED:
            raise ValueError("an agent session's log starts with session_created")
        first = events[0]
        info = first.data
        partition = Partition.from_dict(info["partition"])
        view = cls(
            session_id=first.session_id,
            run_id=info["run_id"],
            task=info["task"],
            partition=partition,
            model=info.get("model", ""),
            max_tokens=int(info.get("max_tokens", 4096)),
            messages=[
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": first_user_message(info["task"], partition)},
            ],
            guard=guard,
        )
        for ev in events:
            view.apply(ev)
        return view

    @property
    def spent(self) -> tuple[Usage, Decimal]:
        """What the session's budget holds: the metered answers plus the sends charged as resent."""
        return self.usage + self.resent_usage, self.cost_usd + self.resent_cost_usd

    def apply(self, ev: Event) -> None:
        self.last_seq = ev.seq
        state = project_state(ev.type)
        if state is not None:
            self.state = state
        t = ev.type
        if t == EventType.SESSION_STARTED:
            self.started = True
        elif t == EventType.MODEL_REQUEST:
            self.pending_turn = int(ev.data["turn"])
            self.unbilled_send = True
        elif t == EventType.MODEL_RESENT:
            # the send of unknown fate is charged; the one it precedes is again of unknown fate
            self.resent_calls += 1
            self.resent_usage = self.resent_usage + Usage.from_dict(ev.data.get("usage"))
            self.resent_cost_usd += Decimal(str(ev.data.get("cost_usd", "0")))
            self.unbilled_send = True
        elif t == EventType.MODEL_ERROR:
            if not ev.data.get("compaction"):
                self.unbilled_send = False  # answered, with an error: nothing billed
        elif t == EventType.CONTEXT_COMPACTED:
            self.summary = Summary(int(ev.data["from_turn"]), int(ev.data["through_turn"]), str(ev.data["summary"]))
            self.compactions += 1
            resp = ChatResponse.from_dict(ev.data["response"])
            self.usage = self.usage + resp.usage
            self.cost_usd += resp.cost_usd
        elif t == EventType.MODEL_RESPONSE:
            resp = ChatResponse.from_dict(ev.data["response"])
            self.turn = int(ev.data["turn"])
            self.pending_turn = None
            self.unbilled_send = False
            self.last_response = resp
            self.messages.append(resp.assistant_message())
            self.open_calls = list(resp.tool_calls)
            self._turn_results_from = self.results
            self.usage = self.usage + resp.usage
            self.cost_usd += resp.cost_usd
        elif t == EventType.TOOL_RESULT:
            call_id = ev.data["call_id"]
            self.messages.append({"role": "tool", "tool_call_id": call_id, "content": ev.data["output"]})
            self.open_calls = [c for c in self.open_calls if c.id != call_id]
            if not self.open_calls:
                self._close_turn()
            if ev.data.get("name") == "finish":
                self.finished = True
                self.finish_summary = str(ev.data.get("summary", ""))
        elif t == EventType.TOOL_CALL:
            self.started_calls.add(ev.data["call_id"])
        elif t == EventType.RESULT_ITEM:
            self.results += 1
        elif t == EventType.SESSION_PAUSED:
            self.pause_reason = str(ev.data.get("reason", ""))
            if self.pause_reason == "budget":
                self.unbilled_send = False  # refused before it was sent
        elif t in (EventType.SESSION_RESUMED, EventType.SESSION_ADMITTED):
            self.pause_reason = None
        elif t == EventType.BUDGET_RAISED:
            self.trip = None  # a person looked at the paused session and let it go on
