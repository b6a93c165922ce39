"""A run's checks (``--check CMD``, fleet.yaml ``changes.check``): the downstream plane as a quota.

:class:`RunChecks` hears every ``change`` event of its run as it becomes durable (a session ended
with a change) and checks that change at once, beside the sessions still running: one Workload per
check, requesting one ``fleet.dev/checks`` and nothing else (``pods`` 0), from the run's queue,
through the very admission controller the run's sessions are admitted by. A ClusterQueue whose
quota covers ``fleet.dev/checks`` therefore bounds how many checks run at once; its cohort can lend
and borrow them, and a check may be preempted (it stops, waits for its readmission, and runs again
from the start, as an evicted Kubernetes Job would).

A queue whose ClusterQueue does **not** cover ``fleet.dev/checks`` (the default queue covers only
``pods``) is not a bound on checks: Kueue would hold such a Workload inadmissible for ever, which
would stop every run that asks for checks without configuring a quota for them, so here each check
runs as soon as its change arrives, without a Workload. To bound checks, cover the resource.

Each check's outcome is recorded as a ``check`` event in the session's log (with the sequence number
of the change it checked); a resumed run reads them back and never runs a recorded check again. The
integration step asks :meth:`RunChecks.outcome` for each change's outcome; it waits for a check
still running and starts one that was never started (a change recorded just before a crash).

A change that touches paths outside its partition is not merged whatever its check says, so its
check is ``skipped`` (no sandbox, no quota). Invariants: at most one check per change; a check's
quota is held only while its command runs; every sandbox is closed when its check ends, is
preempted or is cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agent_fleet.admission.kueue_jobs import uncovered_resources
from agent_fleet.admission.workload_slots import AdmissionRefused, AdmissionSlots
from agent_fleet.changes.change_record import Change
from agent_fleet.changes.checkout import RunBase
from agent_fleet.changes.port import ChangeToCheck, CheckOutcome
from agent_fleet.clock import Clock
from agent_fleet.config import FleetConfig
from agent_fleet.dispatch.slots import SessionSlots
from agent_fleet.domain.decode import decode_as
from agent_fleet.domain.events import Event, EventType
from agent_fleet.domain.payloads import ChangeRecorded, Check
from agent_fleet.engine.workforce import Workforce
from agent_fleet.hands.check_sandbox import CheckRun, CheckSpec, run_check
from agent_fleet.hands.port import SandboxProvider
from agent_fleet.observe.metrics import CheckFigures, check_figures
from agent_fleet.options import RunOptions
from agent_fleet.session.port import SessionLog

__all__ = ["CHECKS_RESOURCE", "ChangeRef", "CheckAdmission", "RunChecker", "RunChecks", "open_checks"]

CHECKS_RESOURCE = "fleet.dev/checks"


@dataclass(frozen=True, slots=True)
class ChangeRef:
    """One recorded change, as a check needs it: identified by its session and its patch's digest."""

    session_id: str
    digest: str  # sha256 of the patch (the change event's ``digest``)
    patch: bytes
    out_of_scope: tuple[str, ...] = ()
    base: str | None = None  # the commit the change is against
    note: str = ""  # why the change as a whole is not carried (then there is nothing to check)
    seq: int = 0  # the change event's sequence number in its session's log, when known

    @classmethod
    def of_change(cls, session_id: str, change: Change, *, seq: int = 0) -> ChangeRef:
        return cls(session_id, change.digest, change.patch, change.out_of_scope, change.base, change.note, seq)

    @classmethod
    def of(cls, event: Event) -> ChangeRef:
        recorded = decode_as(event, ChangeRecorded)
        change = Change.from_event(dict(recorded.record if recorded is not None else {}))
        return cls.of_change(event.session_id, change, seq=event.seq)


class CheckAdmission:
    """Admission of checks: each a Workload of ``fleet.dev/checks`` 1 in the run's queue, through
    the run's admission controller (``slots``: the run's sessions' slots over it). ``None``: no
    controller (a caller's own session slots) — checks are not bounded."""

    def __init__(self, sessions: AdmissionSlots | None, *, queue: str, priority_class: str | None) -> None:
        self.slots: AdmissionSlots | None = None
        self._queue = queue
        if sessions is not None:
            # The sessions' slots drive the controller only while sessions run; these drive it as long
            # as checks run (in `serve`, the host drives it and neither does).
            self.slots = AdmissionSlots(
                sessions.controller,
                queue=queue,
                priority_class=priority_class,
                requests={CHECKS_RESOURCE: 1, "pods": 0},
                drive=sessions.drive,
            )

    @property
    def bounded(self) -> bool:
        """Whether the run's ClusterQueue covers ``fleet.dev/checks`` now (its quota bounds them)."""
        if self.slots is None:
            return False
        objects = self.slots.controller.objects
        lq = objects.resolve_local_queue(self._queue)
        return lq is not None and not uncovered_resources(objects, lq, [CHECKS_RESOURCE])


class RunChecks:
    """The checks of one run (module docstring). Runs in the run's TaskGroup: :meth:`run` until
    :meth:`close`; changes come in through :meth:`heard` (the engine's tap) or :meth:`submit`."""

    def __init__(
        self,
        *,
        run_id: str,
        spec: CheckSpec,
        provider: SandboxProvider,
        log: SessionLog,
        clock: Clock,
        admission: CheckAdmission,
    ) -> None:
        self.run_id = run_id
        self.spec = spec
        self._provider = provider
        self._log = log
        self._clock = clock
        self._admission = admission
        self._done: dict[tuple[str, str], dict[str, Any]] = {}  # (session, change digest) → its recorded check
        self._futures: dict[tuple[str, str], asyncio.Future[dict[str, Any]]] = {}  # (session, change digest)
        self._pending: list[ChangeRef] = []  # heard before run() started
        self._attempts: dict[str, asyncio.Task[CheckRun]] = {}  # running commands, by workload name
        self._preempted: set[str] = set()
        self._tg: asyncio.TaskGroup | None = None
        self._closed = asyncio.Event()
        self.running = 0  # checks whose command runs now
        self.peak = 0
        if admission.slots is not None:
            admission.slots.set_preempt_hook(self._on_preempt)

    # -- figures ----------------------------------------------------------------------------------
    def figures(self) -> CheckFigures:
        return check_figures(self._done.values())

    # -- input ------------------------------------------------------------------------------------
    def heard(self, events: Sequence[Event]) -> None:
        """Durable events (the engine's tap): each change of this run is checked."""
        for ev in events:
            if ev.type == EventType.CHANGE and ev.session_id.rsplit(".", 1)[0] == self.run_id:
                self.submit(ChangeRef.of(ev))

    def restore(self, recorded: Sequence[Event]) -> None:
        """What the run recorded before (``change`` and ``check`` events): recorded checks are kept
        (never run again), the changes without one are checked."""
        for ev in recorded:
            check = decode_as(ev, Check)
            if check is not None:
                self._keep((ev.session_id, check.change_digest), dict(check.record))
        for ev in recorded:
            if ev.type == EventType.CHANGE:
                self.submit(ChangeRef.of(ev))

    def submit(self, change: ChangeRef) -> None:
        """Check ``change`` (once: a change already checked or being checked is ignored)."""
        key = (change.session_id, change.digest)
        if key in self._done or key in self._futures or self._closed.is_set():
            return
        fut = self._futures[key] = asyncio.get_running_loop().create_future()
        if self._tg is None:
            self._pending.append(change)
        else:
            self._tg.create_task(self._check(change, fut))

    async def outcome(self, change: ChangeRef) -> dict[str, Any]:
        """The change's check (the ``check`` event's data): recorded, awaited while it runs, or run now
        when it never was (a change recorded just before a crash). Raises CancelledError once the run
        stops before it ends."""
        key = (change.session_id, change.digest)
        done = self._done.get(key)
        if done is not None:
            return done
        if key not in self._futures:
            if self._closed.is_set():
                raise asyncio.CancelledError
            self.submit(change)
        return await asyncio.shield(self._futures[key])

    async def drain(self) -> None:
        """Until every check submitted so far is recorded."""
        waiting = [f for f in self._futures.values() if not f.done()]
        if waiting:
            await asyncio.wait(waiting)

    # -- the loop ---------------------------------------------------------------------------------
    async def run(self) -> None:
        """Check changes as they come until :meth:`close`; on return (or cancellation) no check runs."""
        stop = asyncio.Event()
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                if self._admission.slots is not None:
                    tg.create_task(self._admission.slots.run(stop))
                pending, self._pending = self._pending, []
                for change in pending:
                    tg.create_task(self._check(change, self._futures[(change.session_id, change.digest)]))
                await self._closed.wait()
                stop.set()
                for task in self._attempts.values():
                    task.cancel()
        finally:
            self._tg = None
            for fut in self._futures.values():
                if not fut.done():
                    fut.cancel()

    def close(self) -> None:
        """No check starts from now on; the running ones are stopped (they run again on resume)."""
        self._closed.set()

    async def _check(self, change: ChangeRef, fut: asyncio.Future[dict[str, Any]]) -> None:
        try:
            data = await self._checked_now(change)
            await self._log.emit_event(change.session_id, EventType.CHECK, data)
        except asyncio.CancelledError:
            if not fut.done():
                fut.cancel()
            raise
        except BaseException as exc:  # the log failed: whoever waits hears why
            if not fut.done():
                fut.set_exception(exc)
            raise
        self._keep((change.session_id, change.digest), data)
        if not fut.done():
            fut.set_result(data)

    def _keep(self, key: tuple[str, str], data: dict[str, Any]) -> None:
        self._done[key] = data

    async def _checked_now(self, change: ChangeRef) -> dict[str, Any]:
        ident = {"change_seq": change.seq, "change_digest": change.digest}
        skipped = {**ident, "outcome": "skipped", "duration_s": 0.0}
        if change.out_of_scope:
            reason = "the change touches paths outside its partition: it is not merged, so it is not checked"
            return {**skipped, "output_tail": reason}
        if change.note:
            return {**skipped, "output_tail": f"the change is not carried: {change.note}"}
        if not change.patch.strip():
            return {**skipped, "output_tail": "the change is empty"}
        name = f"{change.session_id}.check"
        slots = self._admission.slots if self._admission.bounded else None
        queued = self._clock.now()
        while True:
            try:
                permit = await slots.acquire(name) if slots is not None else None
            except AdmissionRefused as exc:  # a fleet.dev/checks quota no check can ever fit in
                return {**skipped, "output_tail": str(exc)}
            wait = self._clock.now() - queued
            attempt = asyncio.ensure_future(self._command(change, name))
            self._attempts[name] = attempt
            try:
                result = await attempt
            except asyncio.CancelledError:
                if name not in self._preempted or self._closed.is_set():
                    raise
                self._preempted.discard(name)
                continue  # preempted: the Workload is back in its queue; run again once readmitted
            finally:
                self._attempts.pop(name, None)
                if permit is not None and slots is not None:
                    slots.release(permit)
            data = {**ident, **result.to_dict(), "wait_s": round(wait, 3)}
            if slots is None:
                data["bounded"] = False  # no fleet.dev/checks quota on the run's queue
            return data

    async def _command(self, change: ChangeRef, name: str) -> CheckRun:
        spec = self.spec
        if change.base is not None and change.base != spec.base:
            spec = replace(spec, base=change.base)
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            return await run_check(self._provider, spec, name=name, patch=change.patch, clock=self._clock)
        finally:
            self.running -= 1

    def _on_preempt(self, name: str, reason: str, by: str | None) -> None:
        attempt = self._attempts.get(name)
        if attempt is not None and not attempt.done():
            self._preempted.add(name)
            attempt.cancel()

    def statistics(self) -> Mapping[str, int]:
        waiting = sum(1 for f in self._futures.values() if not f.done()) - self.running
        return {"running": self.running, "waiting": max(0, waiting), "done": len(self._done)}


async def open_checks(
    *,
    run_id: str,
    base: RunBase | None,
    options: RunOptions,
    config: FleetConfig,
    workforce: Workforce | None,
    log: SessionLog,
    clock: Clock,
    slots: SessionSlots | None,
    listen: Callable[[Callable[[Sequence[Event]], None]], None],
) -> RunChecks | None:
    """The run's checks, or None when it asks for none or keeps no changes (no recorded ``base``: its
    input is not in a git repository — preflight refuses ``--check`` there before a run is recorded).
    ``listen`` registers its ear on the engine's tap; then what the run recorded is read back: its
    checks (never run again) and the changes not yet checked (checked first)."""
    if not options.check or workforce is None or base is None:
        return None
    spec = CheckSpec(
        command=options.check,
        repo=Path(base.repo),
        base=base.commit,
        subdir=base.prefix.rstrip("/"),
        timeout=config.changes.check_timeout_s,
        resources=workforce.resources,
        allow_network=config.hands.allow_network,
    )
    sessions = slots if isinstance(slots, AdmissionSlots) else None
    checks = RunChecks(
        run_id=run_id,
        spec=spec,
        provider=workforce.check_sandboxes(),
        log=log,
        clock=clock,
        admission=CheckAdmission(sessions, queue=options.queue or "default", priority_class=options.priority),
    )
    listen(checks.heard)  # first: a change recorded while the log is read back is heard, not missed
    checks.restore(await log.events_of_run(run_id, [EventType.CHANGE, EventType.CHECK]))
    return checks


class RunChecker:
    """The changes plane's :class:`~agent_fleet.changes.port.ChangeChecker` over the checks of the
    runs an engine drives: integration asks for each change's outcome; the check ran as the change
    arrived (it is awaited while it runs), or runs now. ``checks_of(run_id)``: that run's checks."""

    def __init__(self, checks_of: Callable[[str], RunChecks | None]) -> None:
        self._checks_of = checks_of

    async def check(self, run_id: str, changes: Sequence[ChangeToCheck]) -> Mapping[str, CheckOutcome]:
        checks = self._checks_of(run_id)
        if checks is None:
            return {}
        out: dict[str, CheckOutcome] = {}
        for c in changes:
            data = await checks.outcome(ChangeRef.of_change(c.session_id, c.change))
            out[c.session_id] = CheckOutcome.from_dict(data)
        return out
