"""CPU per model call, and where it goes, for ``benchmarks/throughput.py``.

* :func:`thread_cpu` — CPU seconds so far of each live thread of this process, by thread name
  (Linux ``/proc/self/task``; elsewhere the whole process under one name). The engine's event loop
  runs on the main thread; the SQLite session log commits on its own ``session-log-writer`` thread.
* :func:`children_cpu` — CPU seconds so far of this process's child processes (the simulated
  provider), Linux only.
* :class:`Sampler` — a thread that samples the main thread's Python stack at a fixed interval and
  files each sample under the plane of the innermost ``agent_fleet`` frame (a ``domain`` frame
  counts for its caller; JSON encoding inside the session log counts for the session log). Samples
  are taken when the sampler gets the GIL, so this is a sampled profile, not an exact split.
* :func:`verdicts` — each figure beside its goal and, where one is missed, what binds it.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

__all__ = [
    "GOALS",
    "Sampler",
    "children_cpu",
    "missed",
    "plane_of",
    "thread_cpu",
    "verdicts",
    "where",
    "where_the_time_goes",
]

# The goals of the issue: CPU per call against the naive loop (fleet phase, whole run), and the ceiling.
GOALS = {"cpu_fleet": 0.25, "cpu_whole": 0.4, "ceiling": 4.0}

_PLANES = (
    ("agent_fleet/session/", "session log"),
    ("agent_fleet/spend/providers/", "provider transport"),
    ("agent_fleet/spend/", "gateway"),
    ("agent_fleet/brain/", "brain"),
    ("agent_fleet/dispatch/", "dispatch"),
    ("agent_fleet/capacity.py", "dispatch"),
    ("agent_fleet/admission/", "admission"),
    ("agent_fleet/aggregate/", "aggregation"),
    ("agent_fleet/hands/", "hands"),
)


def _tick() -> float:
    return float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0


def thread_cpu() -> dict[str, float]:
    """CPU seconds of each live thread, summed by name (the main thread is ``main``)."""
    names = {t.native_id: ("main" if t is threading.main_thread() else t.name) for t in threading.enumerate()}
    out: dict[str, float] = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return {"main": time.process_time()}
    hz = _tick()
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended meanwhile
        name = names.get(int(tid), "other")
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / hz
    return out


def children_cpu() -> float | None:
    """CPU seconds of this process's children (the simulated provider), or None where /proc is missing."""
    me = str(os.getpid())
    total, hz = 0.0, _tick()
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:
            total += (int(fields[11]) + int(fields[12])) / hz
    return total


# What the whole run spends beside the model calls' own path (session log appends, deduplication,
# verification and reports, the engine's bookkeeping).
OFF_THE_CALL_PATH = ("session log", "aggregation", "engine (the rest of agent_fleet)")

# A thread whose innermost Python frame is one of these is waiting (epoll, a lock, a queue), not working.
_IDLE = {
    ("selectors.py", "select"),
    ("threading.py", "wait"),
    ("threading.py", "_wait_for_tstate_lock"),
    ("queue.py", "get"),
    ("thread.py", "_worker"),  # concurrent.futures: an executor thread waiting for work
}


def idle(frame: FrameType) -> bool:
    return (os.path.basename(frame.f_code.co_filename), frame.f_code.co_name) in _IDLE


def plane_of(frame: FrameType | None) -> str:
    """The plane a sample of this stack is filed under (module docstring)."""
    leaf = frame
    while frame is not None:
        path = frame.f_code.co_filename.replace(os.sep, "/")
        if "agent_fleet/" in path and "agent_fleet/domain/" not in path:
            for prefix, plane in _PLANES:
                if prefix in path:
                    return plane
            return "engine (the rest of agent_fleet)"
        frame = frame.f_back
    if leaf is not None and "asyncio" in leaf.f_code.co_filename:
        return "event loop"
    return "other (event loop callbacks, libraries)"


@dataclass
class Sampler:
    """Samples every thread's stack every ``interval`` seconds between ``start()`` and ``stop()``;
    counts ``(thread name, plane)`` for the threads that are working (not waiting)."""

    interval: float = 0.002
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()

        def run() -> None:
            me = threading.get_ident()
            main = threading.main_thread()
            while not self._stop.wait(self.interval):
                names = {t.ident: "main" if t is main else t.name for t in threading.enumerate()}
                for ident, frame in sys._current_frames().items():
                    if ident != me and not idle(frame):
                        self.counts[(names.get(ident, "other"), plane_of(frame))] += 1
                del frame

        self._thread = threading.Thread(target=run, name="benchmark-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def split(self, thread_ms: dict[str, float]) -> list[tuple[str, float]]:
        """Each thread's measured ``thread_ms`` shared out by its samples' planes, summed by plane,
        largest first (a thread never seen working keeps its name)."""
        per_thread: Counter[str] = Counter()
        for (name, _), n in self.counts.items():
            per_thread[name] += n
        out: Counter[str] = Counter()
        for name, ms in thread_ms.items():
            seen = per_thread[name]
            if not seen:
                out[f"thread {name}"] += ms
                continue
            for (thread, plane), n in self.counts.items():
                if thread == name:
                    out[plane] += ms * n / seen
        return out.most_common()


def _by_share(sampler: Sampler, total_ms: float) -> dict[str, float]:
    """``total_ms`` (measured for the process, not by thread) shared among threads by their samples."""
    per_thread: Counter[str] = Counter()
    for (name, _), n in sampler.counts.items():
        per_thread[name] += n
    seen = sum(per_thread.values())
    return {name: total_ms * n / seen for name, n in per_thread.items()} if seen else {"main": total_ms}


def missed(z: dict[str, Any]) -> bool:
    """Whether a CPU or ceiling goal is missed in ``out["zero_latency"]``."""
    return (
        z["cpu_ratio"] > GOALS["cpu_fleet"]
        or z["cpu_ratio_with_aggregation"] > GOALS["cpu_whole"]
        or z["ceiling_ratio"] < GOALS["ceiling"]
    )


def where(ours: Any, whole: Any, fleet: Sampler, aggregation: Sampler) -> dict[str, Any]:
    """``out["zero_latency"]["where"]``: the measured run's CPU by thread (``ours``, ``whole``: its
    Figures), the event loop thread's share by plane from a profiled run's samplers, what each
    process used of the machine."""
    per_call = 1000 / ours.calls
    threads = {name: cpu * per_call for name, cpu in ours.threads.items() if cpu > 0}
    aggregation_ms = (whole.cpu - ours.cpu) * per_call
    return {
        "fleet_threads_ms": threads,
        "fleet_planes_ms": fleet.split(threads),
        "aggregation_ms": aggregation_ms,
        "aggregation_planes_ms": aggregation.split(_by_share(aggregation, aggregation_ms)),
        "client_cores": ours.cpu / ours.wall,
        "client_main_cores": ours.threads.get("main", 0.0) / ours.wall,
        "server_cores": None if ours.server_cpu is None else ours.server_cpu / ours.wall,
        "load": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }


def _line(value: float, goal: float, *, at_most: bool) -> str:
    met = value <= goal if at_most else value >= goal
    sign = "<=" if at_most else ">="
    return f"{value:.2f}x (goal {sign} {goal}x: {'met' if met else 'NOT met'})"


def verdicts(z: dict[str, Any]) -> list[str]:
    """The CPU and ceiling lines of the report, from ``out["zero_latency"]`` (see throughput.main)."""
    ours, naive, whole = z["ours"], z["naive"], z["ours_with_aggregation"]
    lines = [
        f"(b) client CPU per call, fleet phase: ours {ours['cpu_ms_per_call']:.2f} ms, naive"
        f" {naive['cpu_ms_per_call']:.2f} ms -> " + _line(z["cpu_ratio"], GOALS["cpu_fleet"], at_most=True),
        f"    the whole run (with aggregation and reports): ours {whole['cpu_ms_per_call']:.2f} ms -> "
        + _line(z["cpu_ratio_with_aggregation"], GOALS["cpu_whole"], at_most=True),
        f"(c) ceiling at zero latency: ours {ours['calls_per_s']:.0f} calls/s, naive {naive['calls_per_s']:.0f}"
        f" calls/s -> " + _line(z["ceiling_ratio"], GOALS["ceiling"], at_most=False),
    ]
    return lines


def where_the_time_goes(z: dict[str, Any]) -> list[str]:
    """The breakdown and what binds each missed goal, from ``out["zero_latency"]["where"]``."""
    w, naive_ms = z["where"], z["naive"]["cpu_ms_per_call"]
    threads = w["fleet_threads_ms"]
    fleet_ms = sum(threads.values())
    by_thread = ", ".join(f"{name} {ms:.3f}" for name, ms in sorted(threads.items(), key=lambda kv: -kv[1]))
    lines = [
        "where ours' CPU per call goes (ms per call: by thread as measured, by plane as a sampled run saw it):",
        f"    fleet phase {fleet_ms:.3f}, by thread: {by_thread}",
        "      by plane: " + ", ".join(f"{plane} {ms:.3f}" for plane, ms in w["fleet_planes_ms"]),
    ]
    agg = w["aggregation_ms"]
    lines.append(f"    aggregation and reports {agg:.3f} (= {agg / naive_ms:.2f}x naive)")
    lines.append("      by plane: " + ", ".join(f"{plane} {ms:.3f}" for plane, ms in w["aggregation_planes_ms"][:6]))
    if z["cpu_ratio"] > GOALS["cpu_fleet"]:
        (top, ms), *_ = w["fleet_planes_ms"] or [("?", 0.0)]
        lines.append(f"    binds (fleet phase): the largest share is {top} ({ms:.3f} ms per call)")
    if z["cpu_ratio_with_aggregation"] > GOALS["cpu_whole"]:
        budget = GOALS["cpu_whole"] * naive_ms
        fleet_planes = dict(w["fleet_planes_ms"])
        beside = {plane: fleet_planes.get(plane, 0.0) for plane in OFF_THE_CALL_PATH}
        fixed = agg + sum(beside.values())
        parts = ", ".join(f"{plane} {ms:.3f}" for plane, ms in beside.items())
        left, path = budget - fixed, fleet_ms - sum(beside.values())
        lines.append(
            f"    binds (whole run): the budget is {budget:.3f} ms per call (0.4x naive); off the model-call path,"
            f" aggregation and reports take {agg:.3f} and, in the fleet phase, {parts}: {fixed:.3f} in all, which"
            + (
                f" leaves {left:.3f} for the model-call path; it takes {path:.3f}"
                if left > 0
                else " is more than the budget: out of reach whatever the model-call path costs"
            )
        )
    if z["ceiling_ratio"] < GOALS["ceiling"]:
        lines.append("    binds (ceiling): " + _ceiling_limit(w))
    return lines


def _ceiling_limit(w: dict[str, Any]) -> str:
    cores, load = os.cpu_count() or 1, w.get("load")
    client, server = w["client_cores"], w.get("server_cores")
    used = f"our process used {client:.2f} cores" + (f", the simulated provider {server:.2f}" if server else "")
    machine = f"{cores} cores, load average {load:.1f}" if load is not None else f"{cores} cores"
    if (load is not None and load > cores) or client + (server or 0.0) > 0.85 * cores:
        return f"the machine's cores ({used}; {machine}): both contenders are CPU-starved"
    if server is not None and server > 0.85:
        return f"the simulated provider's one process ({used}; {machine})"
    if w["client_main_cores"] > 0.85:
        return f"our event loop thread ({w['client_main_cores']:.2f} of one core; {used}; {machine})"
    return f"neither process is CPU-bound ({used}; {machine})"
