"""What waits in one ClusterQueue: an ordered heap of active workloads and a set of
inadmissible ones, with Kueue's requeue rules (``pkg/cache/queue/cluster_queue.go``).

* Order: the sticky preemptor first (BestEffortFIFO keeps a workload that is waiting for its
  victims at the head), then higher priority, then older creation time, then name.
* ``BestEffortFIFO``: a head that cannot be admitted for lack of quota is parked as
  inadmissible, so the next workload becomes the head; parked workloads return to the heap
  when quota is freed in their cohort tree (:meth:`queue_inadmissible`).
* ``StrictFIFO``: every head goes back to the heap, so a head that does not fit blocks the
  queue (except a namespace mismatch, which can never fit).
"""

from __future__ import annotations

import heapq
import itertools

from agent_fleet.admission.objects import BEST_EFFORT_FIFO, STRICT_FIFO
from agent_fleet.admission.workload import WorkloadInfo

__all__ = [
    "FAILED_AFTER_NOMINATION",
    "GENERIC",
    "NAMESPACE_MISMATCH",
    "NO_FIT",
    "PENDING_PREEMPTION",
    "PREEMPTION_NO_CANDIDATES",
    "PendingQueue",
]

# Requeue reasons, as Kueue names them.
GENERIC = ""
FAILED_AFTER_NOMINATION = "FailedAfterNomination"
NAMESPACE_MISMATCH = "NamespaceMismatch"
PENDING_PREEMPTION = "PendingPreemption"
NO_FIT = "NoFit"
PREEMPTION_NO_CANDIDATES = "PreemptionNoCandidates"

_IMMEDIATE_BEST_EFFORT = frozenset({FAILED_AFTER_NOMINATION, PENDING_PREEMPTION})


class PendingQueue:
    __slots__ = ("_counter", "_entries", "_heap", "inadmissible", "name", "sticky", "strategy")

    def __init__(self, name: str, strategy: str = BEST_EFFORT_FIFO) -> None:
        self.name = name
        self.strategy = strategy
        # Lazy-deletion heap: an entry is live only while _entries maps its name to it.
        self._heap: list[tuple[int, float, str, int]] = []
        self._entries: dict[str, tuple[tuple[int, float, str, int], WorkloadInfo]] = {}
        self._counter = itertools.count()
        self.inadmissible: dict[str, WorkloadInfo] = {}
        self.sticky: str | None = None

    # -- membership -------------------------------------------------------------------
    def __contains__(self, name: str) -> bool:
        return name in self._entries or name in self.inadmissible

    @property
    def active_count(self) -> int:
        return len(self._entries)

    def active(self) -> list[WorkloadInfo]:
        return [info for _, info in self._entries.values()]

    def push_active(self, info: WorkloadInfo) -> bool:
        """Add (or re-add) a workload to the heap; a parked one is moved back. False if already active."""
        if info.name in self._entries:
            return False
        self.inadmissible.pop(info.name, None)
        entry = (-info.priority, info.created, info.name, next(self._counter))
        self._entries[info.name] = (entry, info)
        heapq.heappush(self._heap, entry)
        return True

    def park(self, info: WorkloadInfo) -> bool:
        if info.name in self._entries or info.name in self.inadmissible:
            return False
        self.inadmissible[info.name] = info
        return True

    def delete(self, name: str) -> WorkloadInfo | None:
        if self.sticky == name:
            self.sticky = None
        found = self._entries.pop(name, None)
        if found is not None:
            return found[1]
        return self.inadmissible.pop(name, None)

    def pop(self) -> WorkloadInfo | None:
        """Remove and return the head (the sticky preemptor first), or None."""
        if self.sticky is not None and self.sticky in self._entries:
            return self._entries.pop(self.sticky)[1]
        heap = self._heap
        while heap:
            entry = heapq.heappop(heap)
            live = self._entries.get(entry[2])
            if live is not None and live[0] is entry:
                del self._entries[entry[2]]
                return live[1]
        return None

    def peek_order(self) -> list[WorkloadInfo]:
        """Active workloads in the order they would become heads (sticky first)."""
        ordered = sorted(self._entries.values(), key=lambda e: e[0])
        infos = [info for _, info in ordered]
        if self.sticky is not None and self.sticky in self._entries:
            head = self._entries[self.sticky][1]
            infos.remove(head)
            infos.insert(0, head)
        return infos

    # -- Kueue's requeue rule ------------------------------------------------------------
    def requeue(self, info: WorkloadInfo, reason: str) -> bool:
        """Put back a head that was not admitted. Returns True when it was parked as inadmissible."""
        if reason == PENDING_PREEMPTION:
            # The preemptor keeps its place at the head until its victims are gone (Kueue#6929).
            self.sticky = info.name if self.strategy == BEST_EFFORT_FIFO else None
        elif self.sticky == info.name:
            self.sticky = None
        # StrictFIFO puts every head back (it blocks); BestEffortFIFO parks those that lack quota.
        strict = self.strategy == STRICT_FIFO
        immediate = reason != NAMESPACE_MISMATCH if strict else reason in _IMMEDIATE_BEST_EFFORT
        if immediate:
            self.push_active(info)
            return False
        return self.park(info)

    def queue_inadmissible(self) -> bool:
        """Move every parked workload back to the heap (quota was freed nearby)."""
        if not self.inadmissible:
            return False
        parked = list(self.inadmissible.values())
        self.inadmissible.clear()
        for info in parked:
            self.push_active(info)
        return True

    def __repr__(self) -> str:
        return f"PendingQueue({self.name!r}, active={len(self._entries)}, inadmissible={len(self.inadmissible)})"
