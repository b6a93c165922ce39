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
from agent_fleet.brain.protocol import SUBMIT_RESULT, SYSTEM_PROMPT, finding_key, first_user_message
from agent_fleet.domain.decode import decode
from agent_fleet.domain.events import Event, EventType, SessionState, project_state
from agent_fleet.domain.ledger import SessionLedger
from agent_fleet.domain.model import ChatResponse, ToolCall
from agent_fleet.domain.payloads import (
    ContextCompacted,
    ModelError,
    ModelRequest,
    ModelResent,
    ModelResponse,
    ResultRecorded,
    SessionCreated,
    SessionPaused,
    ToolCalled,
    ToolResult,
)
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

    def observe_turn(
        self,
        tool_calls: Iterable[tuple[str, str]],
        *,
        produced: bool = False,
        refused: Iterable[tuple[str, str]] = (),
    ) -> GuardTrip | None: ...


@dataclass
class SessionView:
    session_id: str
    run_id: str
    task: str
    partition: Partition
    model: str
    max_tokens: int
    messages: list[dict[str, Any]]
    temperature: float | None = None  # what the run set for its calls (session_created), sent as set
    seed: int | None = None
    tool_choice: str | None = None
    state: SessionState = SessionState.CREATED
    turn: int = 0  # model responses recorded
    pending_turn: int | None = None  # a model_request with no response yet
    # the last send of the pending turn may have been answered and billed, and is not charged yet
    unbilled_send: bool = False
    last_response: ChatResponse | None = None
    open_calls: list[ToolCall] = field(default_factory=list)  # calls of the last response owed a result
    ledger: SessionLedger = field(default_factory=SessionLedger)  # what it spent, its results
    finished: bool = False
    started: bool = False
    last_seq: int = 0
    pause_reason: str | None = None
    finish_summary: str = ""
    # why the session finished without a ``finish`` call: "repeated_submission" (it submitted only what
    # it had submitted before: nothing new is coming)
    finish_reason: str | None = None
    submitted: set[str] = field(default_factory=set)  # the findings recorded (finding_key)
    submissions: int = 0  # submit_result calls accepted (not refused as an error), an empty one too
    started_calls: set[str] = field(default_factory=set)  # tool calls recorded as started
    guard: TurnGuard | None = None
    trip: GuardTrip | None = None  # the guard stopped the session
    summary: Summary | None = None  # the last context_compacted summary: the requests send it for its turns
    compactions: int = 0
    # tokens the model's server counted per token of the raw estimate, at the last request it answered
    # (1 when it counted fewer, or before an answer): context care scales its estimates by it
    prompt_factor: float = 1.0
    _sent_estimate: int = 0  # the raw estimate of the request sent for the pending turn
    _turn_results_from: int = 0
    _refused: set[str] = field(default_factory=set)  # calls of the turn refused for their arguments

    def _close_turn(self) -> None:
        """A turn ends when its last tool call has its result: tell the guard what it did."""
        if self.guard is None or self.last_response is None or self.trip is not None:
            return
        calls = [(c.name, c.arguments) for c in self.last_response.tool_calls]
        refused = [(c.name, c.arguments) for c in self.last_response.tool_calls if c.id in self._refused]
        self.trip = self.guard.observe_turn(calls, produced=self.results > self._turn_results_from, refused=refused)

    @classmethod
    def from_events(cls, events: list[Event] | tuple[Event, ...], *, guard: TurnGuard | None = None) -> SessionView:
        if not events or events[0].type != EventType.SESSION_CREATED:
            raise ValueError("an agent session's log starts with session_created")
        first = events[0]
        info = decode(first)
        assert isinstance(info, SessionCreated)
        partition = Partition.from_dict(dict(info.partition))
        view = cls(
            session_id=first.session_id,
            run_id=info.run_id,
            task=info.task,
            partition=partition,
            model=info.model,
            max_tokens=info.max_tokens,
            temperature=info.temperature,
            seed=info.seed,
            tool_choice=info.tool_choice,
            messages=[
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": first_user_message(info.task, partition)},
            ],
            guard=guard,
        )
        for ev in events:
            view.apply(ev)
        return view

    @property
    def spent(self) -> tuple[Usage, Decimal]:
        """What the session's budget holds: the metered answers plus the sends charged as resent."""
        return self.ledger.spent

    @property
    def usage(self) -> Usage:
        return self.ledger.usage

    @property
    def cost_usd(self) -> Decimal:
        return self.ledger.cost_usd

    @property
    def results(self) -> int:
        """Result items recorded."""
        return self.ledger.results

    @property
    def resent_calls(self) -> int:
        """Sends of unknown fate charged at their reservation (model_resent)."""
        return self.ledger.resent.calls

    @property
    def resent_usage(self) -> Usage:
        return self.ledger.resent.usage

    def apply(self, ev: Event) -> None:
        self.last_seq = ev.seq
        state = project_state(ev.type)
        if state is not None:
            self.state = state
        self.ledger.fold(ev)
        t, p = ev.type, decode(ev)
        if t == EventType.SESSION_STARTED:
            self.started = True
        elif isinstance(p, ModelRequest):
            self.pending_turn = p.turn
            self.unbilled_send = True
            self._sent_estimate = p.estimate
        elif isinstance(p, ModelResent):
            # the send of unknown fate is charged; after a crash the one it precedes is again of unknown
            # fate; after a timeout (``cause``) the send that timed out is settled here and nothing follows yet
            if not p.cause:
                self.unbilled_send = True
            elif not p.compaction:
                self.unbilled_send = False
        elif isinstance(p, ModelError):
            if not p.compaction:
                self.unbilled_send = False  # answered, with an error: nothing billed
        elif isinstance(p, ContextCompacted):
            self.summary = Summary(p.from_turn, p.through_turn, p.summary)
            self.compactions += 1
        elif isinstance(p, ModelResponse):
            resp = p.response
            if self._sent_estimate > 0 and resp.usage.input_tokens > 0:
                self.prompt_factor = max(1.0, resp.usage.input_tokens / self._sent_estimate)
            self._sent_estimate = 0
            self.turn = p.turn
            self.pending_turn = None
            self.unbilled_send = False
            self.last_response = resp
            self.messages.append(resp.assistant_message())
            self.open_calls = list(resp.tool_calls)
            self._turn_results_from = self.results
            self._refused = set()
        elif isinstance(p, ToolResult):
            self.messages.append({"role": "tool", "tool_call_id": p.call_id, "content": p.output})
            self.open_calls = [c for c in self.open_calls if c.id != p.call_id]
            if p.malformed:
                self._refused.add(p.call_id)
            if not self.open_calls:
                self._close_turn()
            if p.name == "finish":
                self.finished = True
                self.finish_summary = p.summary
                self.finish_reason = None
            elif p.name == SUBMIT_RESULT.name and not p.is_error:
                self.submissions += 1
                if p.repeated and not self.finished:
                    self.finished = True
                    self.finish_reason = "repeated_submission"
        elif isinstance(p, ResultRecorded):
            self.submitted.add(finding_key(p.record))
        elif isinstance(p, ToolCalled):
            self.started_calls.add(p.call_id)
        elif isinstance(p, SessionPaused):
            self.pause_reason = p.reason or ""
            if self.pause_reason == "budget":
                self.unbilled_send = False  # refused before it was sent
        elif t == EventType.SESSION_RESUMED:
            self.pause_reason = None
        elif t == EventType.BUDGET_RAISED:
            self.trip = None  # a person looked at the paused session and let it go on
