"""Event payloads: every event type has one, decoded once and tolerant of older logs; only the decoder
reads an event's ``data`` by key (an AST check over src/)."""

from __future__ import annotations

import ast
from decimal import Decimal
from pathlib import Path

from agent_fleet.domain.decode import decode, decode_as
from agent_fleet.domain.events import Event, EventType
from agent_fleet.domain.ledger import RunLedger, SessionLedger
from agent_fleet.domain.payloads import (
    ModelError,
    ModelResent,
    Planned,
    SessionCompleted,
    SessionPaused,
    ToolResult,
    Unknown,
)
from agent_fleet.domain.usage import Usage

SRC = Path(__file__).parents[2] / "src" / "agent_fleet"
# The one module that reads an event's data by key.
DECODER = {"domain/decode.py"}
# Modules not moved to the payloads yet (none left): each entry is a debt, named here to be paid.
NOT_MOVED_YET: set[str] = set()
_BY_KEY_METHODS = {"get", "items", "keys", "values", "pop", "setdefault", "__getitem__", "__contains__"}


def _is_data(node: ast.AST) -> bool:
    """``<name>.data`` or ``<a>.<b>.data``: an attribute ``data`` of a bound value (an event), not of a
    call's result (``Response(...).data``) or of a literal."""
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "data"
        and isinstance(node.value, ast.Name | ast.Attribute | ast.Subscript)
    )


def _hands_on_data(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and any(_is_data(a) for a in [*node.args, *(k.value for k in node.keywords)])


def by_key_reads(source: str) -> list[int]:
    """Lines that read ``<x>.data`` by key: ``x.data[k]``, ``x.data.get(k)`` (and the other mapping
    methods), ``k in x.data``, or hand it whole to a call that will (``Item.from_dict(x.data)``)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Subscript) and _is_data(node.value)) or _hands_on_data(node):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in _BY_KEY_METHODS and _is_data(node.func.value):
                lines.append(node.lineno)
        elif isinstance(node, ast.Compare):
            tested = [c for op, c in zip(node.ops, node.comparators, strict=True) if isinstance(op, ast.In | ast.NotIn)]
            if any(_is_data(c) for c in tested):
                lines.append(node.lineno)
    return sorted(lines)


def test_the_check_finds_reads_by_key_and_leaves_other_data_alone() -> None:
    found = by_key_reads(
        "a = ev.data['turn']\n"
        "b = ev.data.get('usage')\n"
        "c = 'planner' in self.last.data\n"
        "d = [k for k in run.events[0].data.items()]\n"
        "e = JSONRPC20Response(result=1).data\n"
        "f = payload.record.get('x')\n"
        "g = self.rows['data']\n"
        "h = Event('s', 1, 't', 0.0).data\n"
        "i = ResultItem.from_dict(ev.data)\n"
        "j = apply(gateway, sid, data=ev.data)\n"
        "k = json_response(Response(1).data)\n"
    )
    assert found == [1, 2, 3, 4, 9, 10]


def test_only_the_decoder_reads_an_events_data_by_key() -> None:
    offenders: dict[str, list[int]] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel in DECODER or rel in NOT_MOVED_YET:
            continue
        lines = by_key_reads(path.read_text(encoding="utf-8"))
        if lines:
            offenders[rel] = lines
    assert offenders == {}, "read the event's payload (agent_fleet.domain.decode.decode) instead"
    for rel in NOT_MOVED_YET:  # a module moved over leaves the list
        assert by_key_reads((SRC / rel).read_text(encoding="utf-8")), f"{rel} is moved: take it off the list"


def _ev(type: str, data: dict[str, object], seq: int = 1, sid: str = "r.s00000") -> Event:
    return Event(sid, seq, type, 100.0 + seq, data)


def test_every_event_type_has_a_payload_and_an_unknown_type_is_kept_whole() -> None:
    for t in EventType:
        assert not isinstance(decode(_ev(t, {})), Unknown), t
    newer = decode(_ev("from_a_newer_engine", {"x": 1}))
    assert isinstance(newer, Unknown) and newer.record == {"x": 1}


def test_a_payload_is_decoded_once_per_event() -> None:
    ev = _ev(EventType.MODEL_RESPONSE, {"turn": 2, "response": {"content": "hi", "usage": {"input_tokens": 5}}})
    first = decode(ev)
    assert decode(ev) is first
    assert ev == _ev(EventType.MODEL_RESPONSE, dict(ev.data))  # the kept payload takes no part in equality


def test_older_logs_decode_to_the_defaults_their_engine_meant() -> None:
    # a model_error before retried, kind and model were recorded
    err = decode_as(_ev(EventType.MODEL_ERROR, {"turn": 3, "error": "boom", "status": 500}), ModelError)
    assert err == ModelError(turn=3, error="boom", status=500)
    # a re-sent call charged after a crash (no cause), recorded before ``compaction`` and ``planner``
    resent = decode_as(
        _ev(EventType.MODEL_RESENT, {"turn": 1, "usage": {"input_tokens": 7}, "cost_usd": "0.5"}), ModelResent
    )
    assert resent == ModelResent(turn=1, usage=Usage(7, 0), cost_usd=Decimal("0.5"))
    assert decode(_ev(EventType.SESSION_COMPLETED, {"summary": "done"})) == SessionCompleted("done", 0)
    planned = decode_as(_ev(EventType.PLAN, {"plan": {"task": "t"}}), Planned)
    assert planned is not None and (planned.planner, planned.forecast, planned.base) == (None, None, None)
    # a pause with no reason is not a pause with an empty one
    assert decode(_ev(EventType.SESSION_PAUSED, {})) == SessionPaused(reason=None)
    assert decode(_ev(EventType.TOOL_RESULT, {"call_id": "c", "output": "x"})) == ToolResult("c", output="x")


def _response(turn: int, tokens: int, cost: str, *, retried: tuple[str, ...] = (), model: str = "m") -> Event:
    response = {"content": "", "usage": {"input_tokens": tokens}, "cost_usd": cost, "model": model, "retried": retried}
    return _ev(EventType.MODEL_RESPONSE, {"turn": turn, "response": response}, seq=turn + 1)


def test_a_sessions_ledger_holds_what_its_budget_and_its_dashboard_row_count() -> None:
    events = [
        _ev(EventType.SESSION_CREATED, {"model": "m"}),
        _response(1, 100, "0.10", retried=("rate_limited",)),
        _ev(EventType.MODEL_RESENT, {"turn": 2, "usage": {"input_tokens": 40}, "cost_usd": "0.04"}, seq=3),
        _ev(EventType.MODEL_ERROR, {"turn": 2, "kind": "server", "retried": ["server"]}, seq=4),
        _ev(EventType.ATTEMPT_FAILED, {"attempt": 1, "kind": "timeout"}, seq=5),
        _ev(EventType.RESULT_ITEM, {"id": "r.s00000.r0000"}, seq=6),
    ]
    led = SessionLedger().fold_all(events)
    assert (led.calls, led.usage.total_tokens, led.cost_usd) == (1, 100, Decimal("0.10"))
    assert led.spent == (Usage(140, 0), Decimal("0.14"))
    assert dict(led.errors) == {"rate_limited": 1, "server": 2, "timeout": 1}
    assert (led.call_errors, led.results) == (3, 1)  # 1 retried + 1 failed call + 1 failed attempt


def test_a_runs_ledger_adds_its_own_streams_calls_to_its_sessions() -> None:
    run_events = [
        _ev(
            EventType.PLAN,
            {"plan": {}, "planner": {"usage": {"output_tokens": 9}, "cost_usd": "1", "calls": 1}},
            sid="r",
        ),
        _ev(EventType.EMBEDDINGS, {"usage": {"input_tokens": 3}, "cost_usd": "0.5", "calls": 2, "model": "e"}, sid="r"),
    ]
    ledger = RunLedger.of([], [_response(1, 100, "0.25")], run_events)
    assert (ledger.llm_calls, ledger.usage.total_tokens, ledger.cost_usd) == (4, 112, Decimal("1.75"))
    assert {m: row["calls"] for m, row in ledger.per_model.items()} == {"unknown": 1, "e": 2, "m": 1}
