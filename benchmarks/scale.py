"""Scale: many sessions on one machine, and many more over a local multi-process Ray cluster.

Baseline ("naive", as in throughput.py): ``asyncio.Semaphore(50)`` + the official ``openai`` SDK
making the same calls, with nothing durable, no budgets and no limiter. The simulated provider runs
in its own process; every contender runs in a process of its own, so peak RSS is its own.

(a) one machine: ``--sessions`` (default 10,000) concurrent sessions of the engine (local executor,
    SQLite log) beside the naive loop: peak RSS and client CPU per call, each as a ratio to naive.
(b) Ray: ``--ray-sessions`` (default 10,000; the goal is 100,000) sessions over a local cluster (a
    head with no CPUs for sessions and two worker nodes, ``ray start`` each, on loopback), the log in
    PostgreSQL: calls/s and CPU per call — summed over every process of the cluster and the engine —
    as ratios to the naive loop on the same sessions, and the budget totals: what the one gateway
    metered for the run against the sum of the sessions' recorded spend (must be equal).

Both print calls/s in each quarter of the run's agent calls (``calls_per_s_by_quarter``: the calls in
the order their answers were recorded, each quarter from the end of the previous one), read back from
the run's log after the run (and after its peak RSS is taken): a rate that falls from quarter to
quarter is a cost that grows with the log.

Usage: python benchmarks/scale.py [--sessions 10000] [--ray-sessions 10000] [--skip-local] [--skip-ray]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import secrets
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

from _quarters import call_times, calls_per_s_by_quarter
from agent_fleet.session.store import open_store
from agent_fleet.sim.provider import FixedLatency, SimConfig, sim_provider_process
from agent_fleet.testing.ray_cluster import node_processes
from throughput import CAP, RUNS, _input, run_naive, run_ours

PG = os.environ.get("FLEET_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
LATENCY_S = 0.02


def _child(kind: str, url: str, sessions: int, workdir: Path) -> dict[str, Any]:
    """One contender in this process: its calls, wall and CPU seconds, and peak RSS (MiB)."""
    src = _input(workdir, sessions)
    if kind == "naive":
        fig = asyncio.run(run_naive(url, src, sessions))
    else:
        fig, _ = asyncio.run(run_ours(url, src, sessions, workdir))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out = {"calls": fig.calls, "wall": fig.wall, "cpu": fig.cpu, "rss_mib": rss}
    if kind == "ours":  # read back from the log after the peak RSS is taken
        out["calls_per_s_by_quarter"] = asyncio.run(_quarters(*RUNS[-1]))
    return out


async def _quarters(store: str, run_id: str) -> list[float]:
    """Calls/s in each quarter of the run's agent calls, from its log (benchmarks/_quarters.py)."""
    async with open_store(store) as log:
        start, ends = await call_times(log, run_id)
    return calls_per_s_by_quarter(start, ends)


def _spawn(kind: str, url: str, sessions: int, workdir: Path) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", kind, "--url", url, "--sessions", str(sessions), "--dir", str(workdir)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=7200)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def one_machine(sessions: int) -> dict[str, Any]:
    with (
        tempfile.TemporaryDirectory() as tmp,
        sim_provider_process(SimConfig(latency=FixedLatency(seconds=LATENCY_S))) as url,
    ):
        naive = _spawn("naive", url, sessions, Path(tmp))
        ours = _spawn("ours", url, sessions, Path(tmp))
    per_call = {k: v["cpu"] / v["calls"] * 1000 for k, v in (("naive", naive), ("ours", ours))}
    return {
        "sessions": sessions,
        "naive": {**naive, "cpu_ms_per_call": per_call["naive"]},
        "ours": {**ours, "cpu_ms_per_call": per_call["ours"]},
        "rss_ratio": ours["rss_mib"] / naive["rss_mib"],
        "cpu_per_call_ratio": per_call["ours"] / per_call["naive"],
    }


def _cpu_of_nodes(pgids: list[int]) -> float:
    """CPU seconds (user + system) of every live process of these nodes (Ray's own: raylets, GCS, agents)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in {p for g in pgids for p in node_processes(g)}:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / tick


async def _ray_run(url: str, src: Path, sessions: int, address: str, store: str, out: Path) -> dict[str, Any]:
    from agent_fleet.engine import Engine, RunOptions, deploy

    engines: list[Engine] = []
    options = RunOptions(
        task="Summarise each page",
        input_path=str(src),
        agents=sessions,
        provider=url,
        max_concurrency=CAP,
        embedder="lexical",
        executor=f"ray://{address}",
        out_dir=str(out),
    )
    t0, c0 = time.perf_counter(), time.process_time()
    report = await deploy(options, store_url=store, api_key="sk-bench", on_start=lambda _r, e: engines.append(e))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert report.status == "completed", report.summary
    s = report.summary
    gw = engines[0].gateway
    by_quarter = await _quarters(store, report.run_id)
    verification = s.get("verification", {}) or {}
    calls = int(s["llm_calls"]) - int(verification.get("calls", 0))
    return {
        "calls": calls,
        "wall": wall,
        "driver_cpu": cpu,
        "sessions_completed": s["sessions"]["completed"],
        "log_tokens": s["tokens"]["total"],
        "log_cost_usd": str(s["cost_usd"]),
        "node_workers_cpu": engines[0].workforce.ray.node_cpu_s
        if engines[0].workforce and engines[0].workforce.ray
        else 0.0,
        "gateway_tokens": gw.meter.run.total_tokens,
        "gateway_cost_usd": str(gw.meter.run.cost_usd),
        "calls_per_s_by_quarter": by_quarter,
    }


def over_ray(sessions: int) -> dict[str, Any]:
    import asyncpg

    from agent_fleet.testing.ray_cluster import LocalRayCluster

    schema = f"fleet_scale_{secrets.token_hex(3)}"
    with (
        tempfile.TemporaryDirectory() as tmp,
        sim_provider_process(SimConfig(latency=FixedLatency(seconds=LATENCY_S))) as url,
    ):
        work = Path(tmp)
        naive = _spawn("naive", url, sessions, work)
        src = _input(work, sessions)
        with LocalRayCluster.start(workers=2, head_cpus=0, worker_cpus=1) as cluster:
            pgids = [n.pgid for n in cluster.nodes]
            before = _cpu_of_nodes(pgids)
            ours = asyncio.run(_ray_run(url, src, sessions, cluster.address, f"{PG}?schema={schema}", work / "out"))
            ours["ray_processes_cpu"] = _cpu_of_nodes(pgids) - before
        asyncio.run(_drop(asyncpg, schema))
    ours["cpu"] = ours["driver_cpu"] + ours["node_workers_cpu"] + ours["ray_processes_cpu"]
    rate = {"naive": naive["calls"] / naive["wall"], "ours": ours["calls"] / ours["wall"]}
    per_call = {"naive": naive["cpu"] / naive["calls"] * 1000, "ours": ours["cpu"] / ours["calls"] * 1000}
    exact = ours["log_tokens"] == ours["gateway_tokens"] and Decimal(ours["log_cost_usd"]) == Decimal(
        ours["gateway_cost_usd"]
    )
    return {
        "sessions": sessions,
        "naive": {**naive, "calls_per_s": rate["naive"], "cpu_ms_per_call": per_call["naive"]},
        "ours": {**ours, "calls_per_s": rate["ours"], "cpu_ms_per_call": per_call["ours"]},
        "calls_per_s_ratio": rate["ours"] / rate["naive"],
        "cpu_per_call_ratio": per_call["ours"] / per_call["naive"],
        "budgets_exact": exact,
    }


async def _drop(asyncpg: Any, schema: str) -> None:
    conn = await asyncpg.connect(PG)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--ray-sessions", type=int, default=10_000)
    parser.add_argument("--skip-local", action="store_true")
    parser.add_argument("--skip-ray", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", choices=["naive", "ours"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.child, args.url, args.sessions, Path(args.dir))))
        return
    out: dict[str, Any] = {"cap": CAP, "latency_s": LATENCY_S}
    if not args.skip_local:
        out["one_machine"] = one_machine(args.sessions)
        print(json.dumps({"one_machine": out["one_machine"]}), file=sys.stderr, flush=True)  # kept if (b) fails
    if not args.skip_ray:
        out["ray"] = over_ray(args.ray_sessions)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    if "one_machine" in out:
        m = out["one_machine"]
        print(f"(a) {m['sessions']} sessions in one process (cap {CAP}, {LATENCY_S * 1000:.0f} ms simulated latency)")
        ours, naive = m["ours"], m["naive"]
        print(
            f"    peak RSS: ours {ours['rss_mib']:.0f} MiB, naive {naive['rss_mib']:.0f} MiB -> {m['rss_ratio']:.2f}x"
        )
        print(
            f"    CPU per call: ours {ours['cpu_ms_per_call']:.2f} ms, naive {naive['cpu_ms_per_call']:.2f} ms"
            f" -> {m['cpu_per_call_ratio']:.2f}x"
        )
        print(f"    calls/s by quarter of the calls: ours {_rates(ours['calls_per_s_by_quarter'])}")
    if "ray" in out:
        r = out["ray"]
        print(f"(b) {r['sessions']} sessions over a local Ray cluster (head + 2 worker nodes), log in PostgreSQL")
        print(
            f"    calls/s: ours {r['ours']['calls_per_s']:.0f}, naive {r['naive']['calls_per_s']:.0f}"
            f" -> {r['calls_per_s_ratio']:.2f}x"
        )
        print(f"    calls/s by quarter of the calls: ours {_rates(r['ours']['calls_per_s_by_quarter'])}")
        print(
            f"    CPU per call (engine + every cluster process): ours {r['ours']['cpu_ms_per_call']:.2f} ms,"
            f" naive {r['naive']['cpu_ms_per_call']:.2f} ms -> {r['cpu_per_call_ratio']:.2f}x"
        )
        print(
            f"    budgets: gateway {r['ours']['gateway_tokens']} tokens / ${r['ours']['gateway_cost_usd']},"
            f" sessions' sum {r['ours']['log_tokens']} / ${r['ours']['log_cost_usd']} -> exact: {r['budgets_exact']}"
        )


def _rates(rates: list[float]) -> str:
    return " / ".join(f"{r:.0f}" for r in rates)


if __name__ == "__main__":
    main()
