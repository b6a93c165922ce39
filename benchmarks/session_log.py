"""Durable session-log throughput through the public API, against raw ``executemany`` on the same backend.

Workload: S concurrent agent sessions, each appending N events one after another (every call
awaits its durable acknowledgement before the next), through ``emit_event`` and through
``emit_events`` in batches of B. Baseline, measured in the same run on a fresh store of the
same backend: the very same rows (pre-encoded JSON) inserted with one ``executemany`` in one
transaction, with no projection, no futures and no concurrency — the database's own speed.

    python benchmarks/session_log.py                       # SQLite and PostgreSQL
    python benchmarks/session_log.py --backend sqlite --sessions 1000 --events 50

Goal: SQLite >= 50,000 durable events/s through ``emit_event`` (durable = survives kill -9, the
default ``sync=normal``; the ``?sync=full`` line adds an fsync per commit, for power loss).

Also printed: waking every session at once (a run's start, a wave after a crash) through ``wake``,
which reads the wakes asked for together in one snapshot, against the same sessions read one by
one through ``get_session`` + ``get_events`` (all asked for concurrently), on the same store.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NamedTuple

from agent_fleet.domain.events import EventType
from agent_fleet.session import SessionLog, open_store

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
SQLITE_GOAL = 50_000


def payload(session: int, i: int) -> dict[str, Any]:
    # The size and shape of a typical tool call/result event.
    return {"turn": i, "call_id": f"call_{session}_{i}", "name": "read_file", "output": "x" * 120, "is_error": False}


def session_id(s: int) -> str:
    return f"run-0192abcdef01.s{s:05d}"


class Figure(NamedTuple):
    rate: float  # events/s, wall clock
    cpu_us: float  # CPU microseconds of this process per event (all threads)


def measured(count: int, wall_started: float, cpu_started: float) -> Figure:
    wall = time.perf_counter() - wall_started
    cpu = time.process_time() - cpu_started
    return Figure(count / wall, cpu / count * 1e6)


async def wakes(log: SessionLog, sessions: int) -> tuple[Figure, Figure]:
    """(every session woken at once, the same sessions read one by one); rates in sessions/s."""
    sids = [session_id(s) for s in range(sessions)]

    async def one_by_one(sid: str) -> int:
        record = await log.get_session(sid)
        assert record is not None
        return len(await log.get_events(sid))

    started, cpu = time.perf_counter(), time.process_time()
    separate = await asyncio.gather(*(one_by_one(sid) for sid in sids))
    baseline = measured(sessions, started, cpu)
    started, cpu = time.perf_counter(), time.process_time()
    states = await asyncio.gather(*(log.wake(sid) for sid in sids))
    batched = measured(sessions, started, cpu)
    assert [len(state.events) for state in states] == separate, "wake and get_events disagree"
    return batched, baseline


async def through_api(log: SessionLog, sessions: int, events: int, batch: int) -> Figure:
    async def agent(s: int) -> None:
        sid = session_id(s)
        await log.emit_event(sid, EventType.SESSION_CREATED, {"run_id": "run-0192abcdef01", "index": s})
        if batch == 1:
            for i in range(events - 1):
                await log.emit_event(sid, EventType.TOOL_RESULT, payload(s, i))
        else:
            for start in range(0, events - 1, batch):
                items = [(EventType.TOOL_RESULT, payload(s, i)) for i in range(start, min(start + batch, events - 1))]
                await log.emit_events(sid, items)

    started, cpu = time.perf_counter(), time.process_time()
    async with asyncio.TaskGroup() as group:
        for s in range(sessions):
            group.create_task(agent(s))
    figure = measured(sessions * events, started, cpu)
    last = await log.get_session(session_id(sessions - 1))
    assert last is not None and last.last_seq == events, "benchmark lost events"
    return figure


def rows(sessions: int, events: int) -> list[tuple[str, int, str, float, str]]:
    now = time.time()
    out = []
    for s in range(sessions):
        out.append((session_id(s), 1, "session_created", now, json.dumps({"run_id": "run-0192abcdef01", "index": s})))
        out += [(session_id(s), i + 2, "tool_result", now, json.dumps(payload(s, i))) for i in range(events - 1)]
    return out


async def sqlite_baseline(path: Path, data: list[tuple[str, int, str, float, str]]) -> Figure:
    async with open_store(f"sqlite:///{path}"):
        pass  # same schema and pragmas as the API run
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = NORMAL")
    started, cpu = time.perf_counter(), time.process_time()
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany("INSERT INTO fleet_events (session_id, seq, type, time, data) VALUES (?, ?, ?, ?, ?)", data)
    conn.execute("COMMIT")
    figure = measured(len(data), started, cpu)
    conn.close()
    return figure


async def postgres_baseline(url: str, schema: str, data: list[tuple[str, int, str, float, str]]) -> Figure:
    import asyncpg

    async with open_store(f"{url}?schema={schema}"):
        pass
    conn = await asyncpg.connect(url)
    try:
        started, cpu = time.perf_counter(), time.process_time()
        async with conn.transaction():
            await conn.executemany(
                f'INSERT INTO "{schema}".fleet_events (session_id, seq, type, time, data) VALUES ($1, $2, $3, $4, $5)',
                data,
            )
        return measured(len(data), started, cpu)
    finally:
        await conn.close()


async def drop_schema(url: str, schema: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


async def run_backend(name: str, args: argparse.Namespace) -> dict[str, Figure]:
    """Median of ``--repeat`` runs of each figure, each run on a fresh store."""
    runs = [await run_once(name, args) for _ in range(args.repeat)]
    return {
        label: Figure(
            statistics.median(run[label].rate for run in runs), statistics.median(run[label].cpu_us for run in runs)
        )
        for label in runs[0]
    }


async def run_once(name: str, args: argparse.Namespace) -> dict[str, Figure]:
    data = rows(args.sessions, args.events)
    figures: dict[str, Figure] = {}
    with tempfile.TemporaryDirectory() as tmp:
        counter = iter(range(1000))

        async def fresh(measure: Callable[[SessionLog], Awaitable[Figure]], options: str = "") -> Figure:
            if name == "sqlite":
                async with open_store(f"sqlite:///{tmp}/api{next(counter)}.db{options}") as log:
                    return await measure(log)
            schema = f"fleet_bench_{secrets.token_hex(4)}"
            try:
                async with open_store(f"{args.pg_url}?schema={schema}") as log:
                    return await measure(log)
            finally:
                await drop_schema(args.pg_url, schema)

        if name == "sqlite":
            figures["baseline"] = await sqlite_baseline(Path(tmp) / "baseline.db", data)
        else:
            schema = f"fleet_bench_{secrets.token_hex(4)}"
            try:
                figures["baseline"] = await postgres_baseline(args.pg_url, schema, data)
            finally:
                await drop_schema(args.pg_url, schema)

        async def emit_then_wake(log: SessionLog) -> Figure:
            figure = await through_api(log, args.sessions, args.events, 1)
            figures["wake, all at once"], figures["wake baseline"] = await wakes(log, args.sessions)
            return figure

        figures["emit_event"] = await fresh(emit_then_wake)
        figures[f"emit_events x{args.batch}"] = await fresh(
            lambda log: through_api(log, args.sessions, args.events, args.batch)
        )
        if name == "sqlite":
            # fsync on every commit: survives power loss, not only kill -9.
            figures["emit_event, ?sync=full"] = await fresh(
                lambda log: through_api(log, args.sessions, args.events, 1), "?sync=full"
            )
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "all"], default="all")
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--events", type=int, default=50, help="events per session")
    parser.add_argument("--batch", type=int, default=10, help="events per emit_events call")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure; the median is printed")
    parser.add_argument("--pg-url", default=PG_URL)
    args = parser.parse_args()
    backends = ["sqlite", "postgres"] if args.backend == "all" else [args.backend]
    total = args.sessions * args.events
    print(f"{args.sessions} concurrent sessions x {args.events} events = {total:,} durable events per run,")
    print(f"median of {args.repeat} runs per figure; CPU is this process's (PostgreSQL's own is not counted)")
    ok = True
    for name in backends:
        figures = asyncio.run(run_backend(name, args))
        base = figures.pop("baseline")
        woken, one_by_one = figures.pop("wake, all at once"), figures.pop("wake baseline")
        print(f"\n{name}: {'baseline: raw executemany, one transaction':<44} {base.rate:>9,.0f} events/s", end="")
        print(f"{'':21}{base.cpu_us:6.1f} CPU us/event")
        for label, (rate, cpu_us) in figures.items():
            print(f"{name}: {label:<44} {rate:>9,.0f} events/s  ({rate / base.rate:.2f}x baseline)", end="")
            print(f"  {cpu_us:6.1f} CPU us/event ({cpu_us / base.cpu_us:.1f}x)")
        print(
            f"{name}: wake {args.sessions} sessions at once: {woken.rate:,.0f} sessions/s vs "
            f"get_session + get_events each {one_by_one.rate:,.0f}/s ({woken.rate / one_by_one.rate:.1f}x)"
        )
        if name == "sqlite":
            rate = figures["emit_event"].rate
            verdict = "met" if rate >= SQLITE_GOAL else "MISSED"
            ok = ok and rate >= SQLITE_GOAL
            goal = f"goal {SQLITE_GOAL:,} events/s through emit_event"
            print(f"sqlite: {goal}: {verdict} ({rate / SQLITE_GOAL:.2f}x goal)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
