"""What waits in one ClusterQueue: active workloads in order and a set of inadmissible ones,
with Kueue's requeue rules (``pkg/cache/queue/cluster_queue.go``).

* Order: the sticky preemptor first (BestEffortFIFO keeps a workload that is waiting for its
  victims at the head), then higher priority, then older creation time, then name.
* ``BestEffortFIFO``: a head that cannot be admitted for lack of quota is parked as
  inadmissible, so the next workload becomes the head; parked workloads return to the heap
  when quota is freed in their cohort tree (:meth:`queue_inadmissible`).
* ``StrictFIFO``: every head goes back to the heap, so a head that does not fit blocks the
  queue (except a namespace mismatch, which can never fit).
* Equivalence (Kueue's SchedulingEquivalenceHashing, BestEffortFIFO only): when a head is
  parked for lack of quota, the active workloads equivalent to it (same priority and
  requests) are parked with it, and equivalent newcomers are parked on arrival, until quota
  is freed. They would get the same verdict; this only saves the cycles.

Layout: workloads are grouped by equivalence class. Within a class every member has the same
priority, so the class orders by (creation time, name) alone and only its first active member
sits in the heap. Parking or waking a whole class therefore moves one list, not each member.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from enum import StrEnum

from agent_fleet.admission.objects import BEST_EFFORT_FIFO, STRICT_FIFO
from agent_fleet.admission.workload import WorkloadInfo

__all__ = ["PendingQueue", "RequeueReason"]


class RequeueReason(StrEnum):
    """Why a head goes back to its queue, as Kueue names it."""

    GENERIC = ""
    FAILED_AFTER_NOMINATION = "FailedAfterNomination"
    NAMESPACE_MISMATCH = "NamespaceMismatch"
    PENDING_PREEMPTION = "PendingPreemption"
    NO_FIT = "NoFit"
    PREEMPTION_NO_CANDIDATES = "PreemptionNoCandidates"


_IMMEDIATE_BEST_EFFORT = frozenset({RequeueReason.FAILED_AFTER_NOMINATION, RequeueReason.PENDING_PREEMPTION})
_PARKS_CLASS = frozenset({RequeueReason.NO_FIT, RequeueReason.PREEMPTION_NO_CANDIDATES})

_Key = tuple[float, str]  # (creation time, name): the order inside one class
_Entry = tuple[int, float, str, int]  # heap entry of a class head: (-priority, created, name, seq)


class _Class:
    __slots__ = ("active", "head", "parked", "parked_reason")

    def __init__(self) -> None:
        self.active: list[_Key] = []  # sorted
        self.parked: list[_Key] = []  # unsorted; sorted when woken
        self.head: _Entry | None = None  # the live heap entry of active[0]
        self.parked_reason: str | None = None  # set while the class is parked as a whole


class PendingQueue:
    __slots__ = (
        "_active_count",
        "_classes",
        "_counter",
        "_heap",
        "_info",
        "_parked_count",
        "name",
        "sticky",
        "strategy",
    )

    def __init__(self, name: str, strategy: str = BEST_EFFORT_FIFO) -> None:
        self.name = name
        self.strategy = strategy
        self._heap: list[_Entry] = []
        self._counter = itertools.count()
        self._info: dict[str, WorkloadInfo] = {}
        self._classes: dict[tuple[object, ...], _Class] = {}
        self._active_count = 0
        self._parked_count = 0
        self.sticky: str | None = None

    # -- reading --------------------------------------------------------------------------
    def __contains__(self, name: str) -> bool:
        return name in self._info

    @property
    def active_count(self) -> int:
        return self._active_count

    @property
    def inadmissible_count(self) -> int:
        return self._parked_count

    def active(self) -> list[WorkloadInfo]:
        return [self._info[name] for cls in self._classes.values() for _, name in cls.active]

    def inadmissible(self) -> list[WorkloadInfo]:
        return [self._info[name] for cls in self._classes.values() for _, name in cls.parked]

    def is_active(self, name: str) -> bool:
        info = self._info.get(name)
        if info is None:
            return False
        cls = self._classes[info.equivalence]
        i = bisect.bisect_left(cls.active, (info.created, name))
        return i < len(cls.active) and cls.active[i][1] == name

    def peek_order(self) -> list[WorkloadInfo]:
        """Active workloads in the order they would become heads (sticky first)."""
        infos = sorted(self.active(), key=lambda i: (-i.priority, i.created, i.name))
        if self.sticky is not None and self.is_active(self.sticky):
            head = self._info[self.sticky]
            infos.remove(head)
            infos.insert(0, head)
        return infos

    # -- moves ----------------------------------------------------------------------------
    def _class(self, info: WorkloadInfo) -> _Class:
        cls = self._classes.get(info.equivalence)
        if cls is None:
            cls = self._classes[info.equivalence] = _Class()
        return cls

    def _push_head(self, cls: _Class) -> None:
        if not cls.active:
            cls.head = None
            return
        created, name = cls.active[0]
        entry = (-self._info[name].priority, created, name, next(self._counter))
        cls.head = entry
        heapq.heappush(self._heap, entry)

    def _remove_active(self, info: WorkloadInfo) -> bool:
        cls = self._classes[info.equivalence]
        i = bisect.bisect_left(cls.active, (info.created, info.name))
        if i >= len(cls.active) or cls.active[i][1] != info.name:
            return False
        del cls.active[i]
        self._active_count -= 1
        if i == 0:
            self._push_head(cls)
        return True

    def _remove_parked(self, info: WorkloadInfo) -> bool:
        cls = self._classes[info.equivalence]
        try:
            cls.parked.remove((info.created, info.name))
        except ValueError:
            return False
        self._parked_count -= 1
        return True

    def _drop_if_empty(self, info: WorkloadInfo) -> None:
        cls = self._classes.get(info.equivalence)
        if cls is not None and not cls.active and not cls.parked:
            del self._classes[info.equivalence]

    def add(self, info: WorkloadInfo) -> bool:
        """A new (or evicted) workload arrives: to the heap, or parked with its parked equivalents."""
        if info.name in self._info:
            return False
        cls = self._class(info)
        if self.strategy == BEST_EFFORT_FIFO and cls.parked_reason is not None:
            self._info[info.name] = info
            info.last_reason = cls.parked_reason
            cls.parked.append((info.created, info.name))
            self._parked_count += 1
            return True
        return self.push_active(info)

    def push_active(self, info: WorkloadInfo) -> bool:
        """Add (or re-add) a workload to the active order; a parked one is woken. False if already active."""
        if self.is_active(info.name):
            return False
        if info.name in self._info:
            self._remove_parked(info)
        self._info[info.name] = info
        cls = self._class(info)
        key = (info.created, info.name)
        i = bisect.bisect_left(cls.active, key)
        cls.active.insert(i, key)
        self._active_count += 1
        if i == 0:
            self._push_head(cls)
        return True

    def park(self, info: WorkloadInfo) -> bool:
        if info.name in self._info:
            return False
        self._info[info.name] = info
        self._class(info).parked.append((info.created, info.name))
        self._parked_count += 1
        return True

    def delete(self, name: str) -> WorkloadInfo | None:
        if self.sticky == name:
            self.sticky = None
        info = self._info.pop(name, None)
        if info is None:
            return None
        if not self._remove_active(info):
            self._remove_parked(info)
        self._drop_if_empty(info)
        return info

    def pop(self) -> WorkloadInfo | None:
        """Remove and return the head (the sticky preemptor first), or None."""
        if self.sticky is not None and self.is_active(self.sticky):
            info = self._info[self.sticky]
            self._remove_active(info)
            del self._info[info.name]
            self._drop_if_empty(info)
            return info
        heap = self._heap
        while heap:
            entry = heapq.heappop(heap)
            found = self._info.get(entry[2])
            if found is None:
                continue
            cls = self._classes.get(found.equivalence)
            if cls is None or cls.head is not entry:
                continue
            del cls.active[0]
            self._active_count -= 1
            self._push_head(cls)
            del self._info[found.name]
            self._drop_if_empty(found)
            return found
        return None

    # -- Kueue's requeue rule ---------------------------------------------------------------
    def requeue(self, info: WorkloadInfo, reason: RequeueReason, wait_reason: str = "") -> bool:
        """Put back a head that was not admitted. Returns True when it was parked as inadmissible."""
        if reason == RequeueReason.PENDING_PREEMPTION:
            # The preemptor keeps its place at the head until its victims are gone (Kueue#6929).
            self.sticky = info.name if self.strategy == BEST_EFFORT_FIFO else None
        elif self.sticky == info.name:
            self.sticky = None
        # StrictFIFO puts every head back (it blocks); BestEffortFIFO parks those that lack quota.
        strict = self.strategy == STRICT_FIFO
        immediate = reason != RequeueReason.NAMESPACE_MISMATCH if strict else reason in _IMMEDIATE_BEST_EFFORT
        if immediate:
            self.push_active(info)
            return False
        parked = self.park(info)
        if parked and not strict and reason in _PARKS_CLASS:
            self._park_class(info, wait_reason)
        return parked

    def _park_class(self, info: WorkloadInfo, wait_reason: str) -> None:
        cls = self._classes[info.equivalence]
        cls.parked_reason = wait_reason
        keep: list[_Key] = []
        for key in cls.active:
            if key[1] == self.sticky:
                keep.append(key)
            else:
                self._info[key[1]].last_reason = wait_reason
                cls.parked.append(key)
        self._parked_count += len(cls.active) - len(keep)
        self._active_count -= len(cls.active) - len(keep)
        cls.active = keep
        self._push_head(cls)

    def queue_inadmissible(self) -> bool:
        """Wake every parked workload (quota was freed nearby)."""
        if not self._parked_count:
            for cls in self._classes.values():
                cls.parked_reason = None
            return False
        for cls in self._classes.values():
            cls.parked_reason = None
            if not cls.parked:
                continue
            old_head = cls.active[0] if cls.active else None
            cls.active = sorted(cls.active + cls.parked)
            self._active_count += len(cls.parked)
            cls.parked = []
            if cls.active[0] != old_head:
                self._push_head(cls)
        self._parked_count = 0
        return True

    def __repr__(self) -> str:
        return f"PendingQueue({self.name!r}, active={self._active_count}, inadmissible={self._parked_count})"
