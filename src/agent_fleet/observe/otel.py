"""OpenTelemetry spans derived from the session log's durable events (extra ``otel``).

Off by default (:mod:`agent_fleet.observe.telemetry` says when it is on); when off, nothing here is
imported and nothing changes. When on, the engine hands every batch of events it made durable to
:meth:`FleetTelemetry.heard`, which turns them into spans — the log stays the one source of truth and
no call path is instrumented:

* a run (``run_created``/``run_resumed`` → its end event): ``fleet.run``, with the run's status and
  cost;
* an agent session (``session_started`` → completed, failed, paused or preempted):
  ``invoke_agent fleet-agent``, child of its run;
* a model call (``model_request`` → ``model_response`` or ``model_error``): ``chat {model}``, child of
  its session, with the GenAI semantic conventions' ``gen_ai.operation.name``, ``gen_ai.system`` and
  ``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.response.model``,
  ``gen_ai.usage.input_tokens`` / ``output_tokens`` (the metered figures) and the list-price cost as
  ``fleet.cost_usd``;
* a tool call (``tool_call`` → ``tool_result``): ``execute_tool {name}``.

Spans carry the events' own times. If the application installed an SDK tracer provider, spans go to
it; otherwise the fleet builds one that exports over OTLP/HTTP, configured by the standard
``OTEL_EXPORTER_OTLP_*`` variables, and shuts it down when the engine closes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context, trace
from opentelemetry.trace import Span, Status, StatusCode, Tracer

from agent_fleet.domain.decode import decode
from agent_fleet.domain.events import Event, EventType
from agent_fleet.domain.payloads import (
    ModelError,
    ModelRequest,
    ModelResponse,
    Payload,
    RunCreated,
    RunEnded,
    SessionCreated,
    SessionFailed,
    SessionPaused,
    SessionPreempted,
    ToolCalled,
    ToolResult,
)

__all__ = ["FleetTelemetry"]

_logger = logging.getLogger(__name__)

_SESSION_ENDS: dict[str, str] = {
    EventType.SESSION_COMPLETED: "completed",
    EventType.SESSION_FAILED: "failed",
    EventType.SESSION_PAUSED: "paused",
    EventType.SESSION_PREEMPTED: "preempted",
}
_RUN_ENDS: dict[str, str] = {
    EventType.RUN_COMPLETED: "completed",
    EventType.RUN_PAUSED: "paused",
    EventType.RUN_FAILED: "failed",
    EventType.RUN_INTERRUPTED: "interrupted",
}


def _why_ended(p: Payload) -> str | None:
    """What a session's end records as its cause: a failure's error, else a pause's or preemption's reason."""
    if isinstance(p, SessionFailed):
        return p.error or None
    if isinstance(p, SessionPaused | SessionPreempted):
        return p.reason or None
    return None


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


@dataclass
class _Session:
    span: Span
    model: str = ""
    call: Span | None = None  # the model call in flight
    tools: dict[str, Span] = field(default_factory=dict)  # call id → its span


class FleetTelemetry:
    """Turns durable events into spans (see the module docstring). ``heard`` never raises."""

    def __init__(self, tracer: Tracer, *, system: str, close: Callable[[], Any] | None = None) -> None:
        self._tracer = tracer
        self._system = system
        self._close = close
        self._runs: dict[str, Span] = {}
        self._sessions: dict[str, _Session] = {}
        self._models: dict[str, str] = {}  # session id → the model it was created with
        self._failed = False

    @classmethod
    def from_environment(cls, *, system: str) -> FleetTelemetry:
        """Spans to the application's tracer provider, or to OTLP/HTTP per ``OTEL_EXPORTER_OTLP_*``."""
        provider: Any = trace.get_tracer_provider()
        close: Callable[[], Any] | None = getattr(provider, "force_flush", None)
        if not hasattr(provider, "add_span_processor"):  # the API's no-op or proxy: nobody configured the SDK
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            provider = TracerProvider(resource=Resource.create({"service.name": "agent-fleet"}))
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
            close = provider.shutdown
        return cls(provider.get_tracer("agent_fleet"), system=system, close=close)

    def close(self) -> None:
        """End what is still open (the engine stopped) and flush the exporter."""
        for sid in list(self._sessions):
            self._end_session(sid, None, "stopped")
        for run_id, span in list(self._runs.items()):
            span.end()
            del self._runs[run_id]
        if self._close is not None:
            self._close()

    def heard(self, events: Sequence[Event]) -> None:
        try:
            for ev in events:
                self._one(ev)
        except Exception:  # telemetry must never break a run
            if not self._failed:
                self._failed = True
                _logger.exception("telemetry: could not record spans; the run goes on")

    def _one(self, ev: Event) -> None:
        sid = ev.session_id
        if "." not in sid:
            self._run_event(ev)
            return
        t, p = ev.type, decode(ev)
        if isinstance(p, SessionCreated):
            self._models[sid] = p.model
        elif t in (EventType.SESSION_STARTED, EventType.SESSION_RESUMED):
            self._start_session(ev)
        elif t in _SESSION_ENDS:
            self._end_session(sid, ev.time, _SESSION_ENDS[t], _why_ended(p))
        elif t == EventType.MODEL_REQUEST:
            self._start_call(ev)
        elif t in (EventType.MODEL_RESPONSE, EventType.MODEL_ERROR):
            self._end_call(ev)
        elif t == EventType.TOOL_CALL:
            self._start_tool(ev)
        elif t == EventType.TOOL_RESULT:
            self._end_tool(ev)

    def _run_event(self, ev: Event) -> None:
        run_id = ev.session_id
        if ev.type in (EventType.RUN_CREATED, EventType.RUN_RESUMED) and run_id not in self._runs:
            attrs = {"fleet.run_id": run_id}
            created = decode(ev)
            if isinstance(created, RunCreated):
                attrs["fleet.task"] = created.task[:500]
            self._runs[run_id] = self._tracer.start_span("fleet.run", start_time=_ns(ev.time), attributes=attrs)
        elif ev.type in _RUN_ENDS and run_id in self._runs:
            span = self._runs.pop(run_id)
            ended = decode(ev)
            brief = (ended.summary if isinstance(ended, RunEnded) else None) or {}
            span.set_attribute("fleet.status", _RUN_ENDS[ev.type])
            for key in ("cost_usd", "results_raw", "results_unique"):
                if brief.get(key) is not None:
                    span.set_attribute(f"fleet.{key}", brief[key])
            span.end(end_time=_ns(ev.time))

    def _start_session(self, ev: Event) -> None:
        sid = ev.session_id
        if sid in self._sessions:
            return
        parent = self._runs.get(sid.rsplit(".", 1)[0])
        ctx = trace.set_span_in_context(parent) if parent is not None else context.Context()
        attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "fleet-agent", "gen_ai.agent.id": sid}
        span = self._tracer.start_span(
            "invoke_agent fleet-agent", context=ctx, start_time=_ns(ev.time), attributes=attrs
        )
        self._sessions[sid] = _Session(span, model=self._models.get(sid, ""))

    def _session(self, ev: Event) -> _Session:
        if ev.session_id not in self._sessions:  # a session already running when telemetry started
            self._start_session(ev)
        return self._sessions[ev.session_id]

    def _end_session(self, sid: str, at: float | None, state: str, error: Any = None) -> None:
        s = self._sessions.pop(sid, None)
        if s is None:
            return
        end = None if at is None else _ns(at)
        for span in [*s.tools.values(), *([s.call] if s.call else [])]:
            span.end(end_time=end)
        s.span.set_attribute("fleet.session_state", state)
        if state == "failed":
            s.span.set_status(Status(StatusCode.ERROR, str(error or "")[:200]))
        s.span.end(end_time=end)

    def _start_call(self, ev: Event) -> None:
        s = self._session(ev)
        p = decode(ev)
        model = (p.model if isinstance(p, ModelRequest | ModelError) else "") or s.model
        attrs: dict[str, str | int] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": self._system,
            "gen_ai.provider.name": self._system,
            "gen_ai.request.model": model,
            "fleet.session_id": ev.session_id,
            "fleet.turn": p.turn if isinstance(p, ModelRequest | ModelResponse | ModelError) else 0,
        }
        ctx = trace.set_span_in_context(s.span)
        s.call = self._tracer.start_span(f"chat {model}", context=ctx, start_time=_ns(ev.time), attributes=attrs)

    def _end_call(self, ev: Event) -> None:
        s = self._session(ev)
        if s.call is None:  # re-sent after a crash: its request was recorded by the engine that died
            self._start_call(ev)
        span = s.call
        assert span is not None
        s.call = None
        p = decode(ev)
        if isinstance(p, ModelError):
            span.set_attribute("error.type", str(p.kind or p.status or "error"))
            span.set_status(Status(StatusCode.ERROR, p.error[:200]))
        elif isinstance(p, ModelResponse):
            response = p.response
            span.set_attribute("gen_ai.response.model", response.model)
            span.set_attribute("gen_ai.usage.input_tokens", response.usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", response.usage.output_tokens)
            span.set_attribute("gen_ai.response.finish_reasons", [response.finish_reason])
            span.set_attribute("fleet.cost_usd", float(response.cost_usd))
            if response.usage.cached_input_tokens:
                span.set_attribute("gen_ai.usage.cache_read.input_tokens", response.usage.cached_input_tokens)
        span.end(end_time=_ns(ev.time))

    def _start_tool(self, ev: Event) -> None:
        s = self._session(ev)
        p = decode(ev)
        name, call_id = (p.name, p.call_id) if isinstance(p, ToolCalled) else ("", "")
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id}
        ctx = trace.set_span_in_context(s.span)
        s.tools[call_id] = self._tracer.start_span(
            f"execute_tool {name}", context=ctx, start_time=_ns(ev.time), attributes=attrs
        )

    def _end_tool(self, ev: Event) -> None:
        s = self._sessions.get(ev.session_id)
        p = decode(ev)
        if s is None or not isinstance(p, ToolResult):
            return
        span = s.tools.pop(p.call_id, None)
        if span is None:
            return
        if p.is_error:
            span.set_status(Status(StatusCode.ERROR, "the tool returned an error"))
        span.end(end_time=_ns(ev.time))
