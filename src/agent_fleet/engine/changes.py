"""A run's code changes, wired: its base recorded with its plan, its sessions' changes kept as
branches while it runs, and merged into the run's branch when its sessions have ended.

* :func:`record_base` (at ``create_run``): ``HEAD`` of the repository holding a directory input is
  the run's base, recorded in the ``plan`` event (``base``); a checkout with uncommitted changes is
  said in one line (the run bases on ``HEAD`` without them). An input outside a repository records
  no base: the run keeps no changes.
* :class:`ChangeKeeper`: each session's ``change`` event (recorded with its completion) becomes a
  commit on the session's branch, in batches while the run goes on; at the end :meth:`integrate`
  writes every branch again from the log (identically — a resumed run's branches are an
  uninterrupted run's), asks the run's checker (``--check``) about the in-scope changes, merges the
  ones that may be merged, pushes (``--push``) and records ``changes_integrated`` on the run.

The seams of ``--check`` and ``--push`` are :func:`checker_for` and :func:`push_for`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agent_fleet.changes.change_record import Change
from agent_fleet.changes.checkout import Applied, RunBase, apply_run, find_base
from agent_fleet.changes.fastimport import Identity
from agent_fleet.changes.integrate import (
    Integration,
    Placed,
    Planned,
    base_missing,
    commit_changes,
    merge_changes,
)
from agent_fleet.changes.port import ChangeChecker, ChangeToCheck, CheckOutcome, PushHook
from agent_fleet.changes.run_listing import NOT_CAPTURED, listing
from agent_fleet.changes.workspace_changes import RunChanges
from agent_fleet.config import FleetConfig
from agent_fleet.domain.decode import decode_as
from agent_fleet.domain.events import Event, EventType
from agent_fleet.domain.ids import session_id_for
from agent_fleet.domain.payloads import ChangeRecorded, ChangesIntegrated
from agent_fleet.domain.payloads import Planned as PlanRecorded
from agent_fleet.domain.plan import InputKind, Plan
from agent_fleet.engine.checks import RunChecker, RunChecks
from agent_fleet.errors import FleetError, InputError, UsageError
from agent_fleet.options import RunOptions
from agent_fleet.session.port import SessionLog

if TYPE_CHECKING:
    from agent_fleet.engine.core import Engine

__all__ = [
    "ChangeKeeper",
    "apply_changes",
    "changes_view",
    "check_base",
    "checker_for",
    "load_base",
    "push_for",
    "record_base",
    "run_changes",
    "run_changes_view",
]

log = logging.getLogger(__name__)

_BATCH_S = 1.0  # how long recorded changes wait to be committed together while the run goes on


async def record_base(plan: Plan) -> RunBase | None:
    """The base of a new run (module docstring); None when its input is not in a repository."""
    if plan.kind is not InputKind.DIRECTORY or not plan.input_path:
        return None
    base = await asyncio.to_thread(find_base, plan.input_path)
    if base is not None and base.dirty:
        log.warning(
            "agent-fleet: %s has uncommitted changes: the run bases on HEAD (%s) without them",
            base.repo,
            base.commit[:12],
        )
    return base


def _change(ev: Event) -> Change:
    """The change a ``change`` event records."""
    recorded = decode_as(ev, ChangeRecorded)
    return Change.from_event(dict(recorded.record if recorded is not None else {}))


def base_of(run_events: Sequence[Event]) -> RunBase | None:
    for ev in run_events:
        planned = decode_as(ev, PlanRecorded)
        if planned is not None and planned.base:
            return RunBase.from_dict(dict(planned.base))
    return None


async def load_base(log: SessionLog, run_id: str) -> RunBase | None:
    """The base a run recorded with its plan (None: it keeps no changes)."""
    return base_of(await log.get_events(run_id))


async def check_base(log: SessionLog, run_id: str) -> None:
    """Before a run goes on: raise :class:`InputError` (exit 2) when its base commit is gone. Its
    recorded changes stay in the log (``agent-fleet changes`` still lists them)."""
    base = await load_base(log, run_id)
    if base is None:
        return
    why = await asyncio.to_thread(base_missing, base.repo, base.commit)
    if why is not None:
        raise InputError(f"run {run_id} cannot go on: {why}; its recorded changes are kept (agent-fleet changes)")


def run_changes(base: RunBase, config: FleetConfig) -> RunChanges:
    c = config.changes
    return RunChanges.of(base, max_file_bytes=c.max_file_bytes, max_patch_bytes=c.max_patch_bytes, ignore=c.ignore)


def checker_for(engine: Engine, options: RunOptions) -> ChangeChecker | None:
    """The run's checks (``--check CMD``): each change's outcome from the checks its coordinator ran as
    the changes arrived; None: every in-scope change may be merged."""
    if not options.check:
        return None

    def checks_of(run_id: str) -> RunChecks | None:
        run = next((r for r in engine.coordinators() if r.run_id == run_id), None)
        return run.checks if run is not None else None

    return RunChecker(checks_of)


def push_for(engine: Engine, options: RunOptions) -> PushHook | None:
    """Where the run's branches are pushed once written (``--push REMOTE``); None: nowhere. The push
    itself is the run's last step (:func:`agent_fleet.engine.push.push_after_run`), once the run has
    ended and written its outputs: a remote that refuses then loses nothing."""
    return None


def recorded(plan: Plan, run_id: str, events: Sequence[Event]) -> list[tuple[str, str, Change]]:
    """The ``change`` events among ``events`` as ``(session_id, partition_id, change)``, in partition
    order (the last one of a session counts: a session records one)."""
    partitions = {session_id_for(run_id, p.index): p for p in plan.partitions}
    found: dict[str, Change] = {}
    for ev in events:
        change = decode_as(ev, ChangeRecorded)
        if change is not None and ev.session_id in partitions:
            found[ev.session_id] = Change.from_event(dict(change.record))
    return [(sid, partitions[sid].id, found[sid]) for sid in partitions if sid in found]


def last_integration(run_events: Sequence[Event]) -> Integration | None:
    for ev in reversed(run_events):
        integrated = decode_as(ev, ChangesIntegrated)
        if integrated is not None:
            return Integration.from_event(dict(integrated.record))
    return None


async def changes_view(log: SessionLog, run_id: str, plan: Plan) -> dict[str, Any]:
    """``agent-fleet changes RUN_ID --json``: the run's changes as its log has them."""
    run_events = await log.get_events(run_id)
    base = base_of(run_events)
    changes = recorded(plan, run_id, await log.events_of_run(run_id, [EventType.CHANGE])) if base else []
    return listing(run_id, base, changes, last_integration(run_events))


def _identity(base: RunBase) -> Identity:
    return Identity(when=base.when)


class ChangeKeeper:
    """The changes of one run an engine drives (module docstring)."""

    def __init__(self, engine: Engine, run_id: str, plan: Plan, options: RunOptions, base: RunBase) -> None:
        self.engine = engine
        self.run_id = run_id
        self.plan = plan
        self.options = options
        self.base = base
        self.spec = run_changes(base, engine.config)
        self._partition = {session_id_for(run_id, p.index): p.id for p in plan.partitions}
        self._heard: list[Event] = []
        self._wake = asyncio.Event()
        self._git = asyncio.Lock()  # one writer of the run's refs at a time

    def heard(self, events: Sequence[Event]) -> None:
        """Durable events of the run's sessions (the engine's tap): changes are committed soon."""
        new = [e for e in events if e.type == EventType.CHANGE and e.session_id in self._partition]
        if new:
            self._heard += new
            self._wake.set()

    async def keep(self) -> None:
        """While the run goes on: commit what was heard, in batches. Cancelled at the run's end; a
        failure is logged (the branches are written again, from the log, by :meth:`integrate`)."""
        while True:
            await self._wake.wait()
            await self.engine.clock.sleep(_BATCH_S)
            self._wake.clear()
            batch, self._heard = self._heard, []
            planned = [Planned(e.session_id, self._partition[e.session_id], _change(e)) for e in batch]
            try:
                async with self._git:
                    committing = asyncio.ensure_future(asyncio.to_thread(self._commit, planned))
                    try:
                        await asyncio.shield(committing)
                    except asyncio.CancelledError:
                        # git goes on in its thread: the refs stay this batch's until it is done
                        await asyncio.wait({committing})
                        raise
            except FleetError as exc:
                log.warning("agent-fleet: run %s: could not keep changes on their branches yet: %s", self.run_id, exc)

    def _commit(self, planned: Sequence[Planned]) -> list[Placed]:
        b = self.base
        return commit_changes(
            b.repo, run_id=self.run_id, base=b.commit, identity=_identity(b), task=self.plan.task, planned=planned
        )

    async def integrate(self, events: Sequence[Event] | None = None) -> tuple[dict[str, Any], dict[str, bytes]]:
        """Every recorded change on its branch, the mergeable ones merged into the run's branch, the
        result recorded; returns the ``changes`` listing (with ``error`` when git could not) and each
        change's patch by session id (for the reports)."""
        e, b, run_id = self.engine, self.base, self.run_id
        if events is None:
            events = await e.log.events_of_run(run_id, [EventType.CHANGE])
        changes = recorded(self.plan, run_id, events)
        if not changes:  # nothing to keep: no branch is written
            return listing(run_id, b, changes, None), {}
        planned = [Planned(sid, pid, ch) for sid, pid, ch in changes]
        try:
            async with self._git:
                committed = await asyncio.to_thread(self._commit, planned)
                checks = await self._checks(planned, committed)
                planned = [dataclasses.replace(p, blocked=self._blocked(p, checks.get(p.session_id))) for p in planned]
                integration = await asyncio.to_thread(
                    merge_changes,
                    b.repo,
                    run_id=run_id,
                    base=b.commit,
                    identity=_identity(b),
                    planned=planned,
                    committed=committed,
                )
        except FleetError as exc:
            log.warning("agent-fleet: run %s: its changes were not merged: %s", run_id, exc)
            return listing(run_id, b, changes, None, error=str(exc)), patches_of(changes)
        placed = tuple(
            dataclasses.replace(p, check=checks[p.session_id].to_dict()) if p.session_id in checks else p
            for p in integration.placed
        )
        integration = dataclasses.replace(integration, placed=placed)
        await self._push(integration)
        run_events = await e.log.get_events(run_id)
        last = last_integration(run_events)
        if last is None or last.to_event() != integration.to_event():
            await e.log.emit_event(run_id, EventType.CHANGES_INTEGRATED, integration.to_event())
        return listing(run_id, b, changes, integration), patches_of(changes)

    @staticmethod
    def _blocked(p: Planned, check: CheckOutcome | None) -> str | None:
        if p.change.out_of_scope:
            return "outside the partition: " + ", ".join(p.change.out_of_scope[:20])
        if check is not None and not check.passed:
            return f"its check {check.outcome}"
        return None

    async def _checks(self, planned: Sequence[Planned], committed: Sequence[Placed]) -> dict[str, CheckOutcome]:
        checker = checker_for(self.engine, self.options)
        if checker is None:
            return {}
        b = self.base
        offered = [
            ChangeToCheck(p.session_id, p.partition_id, b.repo, b.prefix, b.commit, c.branch, c.commit, p.change)
            for p, c in zip(planned, committed, strict=True)
            if c.commit is not None and c.branch is not None and not p.change.out_of_scope
        ]
        return dict(await checker.check(self.run_id, offered)) if offered else {}

    async def _push(self, integration: Integration) -> None:
        hook = push_for(self.engine, self.options)
        if hook is None:
            return
        branches = [integration.branch, *(p.branch for p in integration.placed if p.branch is not None)]
        await hook.push(self.run_id, self.base.repo, branches)


def patches_of(changes: Sequence[tuple[str, str, Change]]) -> dict[str, bytes]:
    return {sid: ch.patch for sid, _, ch in changes}


async def run_changes_view(log: SessionLog, run_id: str) -> dict[str, Any]:
    """``agent-fleet changes RUN_ID``: raises :class:`~agent_fleet.errors.SessionNotFound` for no such run."""
    from agent_fleet.engine.records import load_run

    _options, plan = await load_run(log, run_id)
    return await changes_view(log, run_id, plan)


async def apply_changes(log: SessionLog, run_id: str) -> Applied:
    """``agent-fleet apply RUN_ID``: merge the run's branch into the checkout of its repository."""
    from agent_fleet.engine.records import load_run

    await load_run(log, run_id)  # no such run: SessionNotFound
    run_events = await log.get_events(run_id)
    base = base_of(run_events)
    if base is None:
        raise UsageError(f"run {run_id} has no changes to apply: {NOT_CAPTURED}")
    integration = last_integration(run_events)
    if integration is None:
        raise UsageError(f"run {run_id} has not merged its changes yet (they are merged when its sessions have ended)")
    return await asyncio.to_thread(apply_run, base.repo, integration.branch)
