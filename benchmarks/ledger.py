"""The readers of a run's log, each event's payload decoded once, against a fresh decode per reader.

Workload: one run's events, as a store hands them back: ``--sessions`` agent sessions (default 1,000)
of ``--turns`` turns each (default 8: a model request and response, a tool call and its result per
turn, a result item every other turn), folded by the readers that read a finished run: the run's
figures (:func:`~agent_fleet.observe.summary.run_figures`), the dashboard's row of every session,
the models' quality signals and the sessions' shapes.

Baseline, measured in the same run: the same readers over the same events, each reader handed its
own copies of them (as if each had read the log itself), so each decodes every payload again — what
every reader paid when each decoded ``data`` on its own. The figure is the decode-once time over the
baseline's (lower is better), the best of ``--repeat`` interleaved runs of each (the best, not the median:
on a shared host the other processes only ever add time).

    python benchmarks/ledger.py [--sessions 1000] [--turns 8] [--repeat 5]

Measured (300 sessions, 11,400 events, best of 5; a shared 2-core host, load average 14-20, so the
figures wander): decoded once 0.34-0.45x the baseline's time, 10-17 us per event for the four
readers. The same script over the readers as they were before the payloads (each read ``data`` by
key; the summary and the dashboard each decoded every answer) gave 9-11 us per event in the same
minutes: a typed payload costs more to build than a key read (the answer's ``ChatResponse``, built
by every reader before, is most of it), and decoding it once wins that back only about evenly.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

from agent_fleet.domain.events import Event, EventType, SessionRecord, SessionState
from agent_fleet.domain.model import ChatResponse, ToolCall
from agent_fleet.domain.usage import Usage
from agent_fleet.observe.dashboard.figures import SessionFigures
from agent_fleet.observe.summary import run_figures
from agent_fleet.supervise.quality_signals import model_signals
from agent_fleet.supervise.shape import session_shapes

RUN = "bench-run"


def build(sessions: int, turns: int) -> tuple[list[SessionRecord], list[tuple[str, int, str, float, dict]]]:
    records, rows = [], []
    for s in range(sessions):
        sid = f"{RUN}.s{s:05d}"
        records.append(SessionRecord(sid, "agent", RUN, SessionState.COMPLETED, 0, 0.0, 0.0))
        seq = 0

        def add(type: str, data: dict, sid: str = sid) -> None:
            nonlocal seq
            seq += 1
            rows.append((sid, seq, type, 1000.0 + seq, data))

        add(EventType.SESSION_CREATED, {"run_id": RUN, "model": "m-small", "partition": {"est_tokens": 900}})
        for t in range(1, turns + 1):
            add(EventType.MODEL_REQUEST, {"turn": t})
            call = ToolCall(f"c{t}", "read_file", '{"path": "a.py"}')
            response = ChatResponse(None, (call,), Usage(1200 + t, 80), "tool_calls", "m-small", retried=())
            add(EventType.MODEL_RESPONSE, {"turn": t, "response": response.to_dict()})
            add(EventType.TOOL_CALL, {"call_id": call.id, "name": call.name, "arguments": call.arguments})
            add(EventType.TOOL_RESULT, {"call_id": call.id, "name": call.name, "output": "x" * 200, "is_error": False})
            if t % 2 == 0:
                add(EventType.RESULT_ITEM, {"id": f"{sid}.r{t:04d}", "title": "a finding", "confidence": 0.8})
        add(EventType.SESSION_COMPLETED, {"summary": "done", "results": turns // 2})
    return records, rows


def readers(records: list[SessionRecord]) -> list[Callable[[Sequence[Event]], object]]:
    def dashboard(events: Sequence[Event]) -> object:
        rows: dict[str, SessionFigures] = {}
        for ev in events:
            row = rows.get(ev.session_id)
            if row is None:
                row = rows[ev.session_id] = SessionFigures(ev.session_id)
            row.fold(ev)
        return rows

    return [
        lambda events: run_figures(records, list(events)),
        dashboard,
        lambda events: model_signals(events, (), since=0.0),
        session_shapes,
    ]


def once(records: list[SessionRecord], rows: list[tuple[str, int, str, float, dict]], *, shared: bool) -> float:
    fold = readers(records)
    common = [Event(*r) for r in rows]
    # the copies are made before the clock starts: only the folding is timed
    inputs = [common if shared else [Event(*r) for r in rows] for _ in fold]
    start = time.perf_counter()
    for reader, events in zip(fold, inputs, strict=True):
        reader(events)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    records, rows = build(args.sessions, args.turns)
    shared, fresh = [], []
    for _ in range(args.repeat):  # interleaved, so drift on a shared host falls on both
        fresh.append(once(records, rows, shared=False))
        shared.append(once(records, rows, shared=True))
    a, b = min(shared), min(fresh)
    print(f"events: {len(rows):,}  readers: {len(readers(records))}")
    print(f"decoded once:          {a * 1e3:8.1f} ms  ({a / len(rows) * 1e6:.2f} us per event)")
    print(f"baseline (per reader): {b * 1e3:8.1f} ms  ({b / len(rows) * 1e6:.2f} us per event)")
    print(f"ratio: {a / b:.2f}x the baseline's time")


if __name__ == "__main__":
    main()
