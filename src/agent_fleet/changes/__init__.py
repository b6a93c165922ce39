"""The changes plane: what coding agents deliver — their sessions' code changes, kept and merged.

Pure git operations, run with real git as a subprocess, never touching the user's checkout, branch,
index or stash (temporary index files, ``fast-import``, ``merge-tree``):

* :mod:`~agent_fleet.changes.capture`: a session's worktree against the run's base, as one patch;
* :mod:`~agent_fleet.changes.integrate`: each change on its branch, the mergeable ones merged into
  the run's branch, deterministically (the same changes give the same commit ids);
* :mod:`~agent_fleet.changes.checkout`: the run's base from the user's checkout, and ``apply``;
* :mod:`~agent_fleet.changes.run_listing`: the changes listing, the summary block, the report sections.

Other planes use :mod:`agent_fleet.changes.port`; the engine wires the rest.
"""

from agent_fleet.changes.capture import capture
from agent_fleet.changes.change_record import Change, FileChange, Refusal
from agent_fleet.changes.checkout import Applied, RunBase, apply_run, find_base
from agent_fleet.changes.fastimport import Identity
from agent_fleet.changes.integrate import (
    Integration,
    Placed,
    Planned,
    base_missing,
    commit_changes,
    integrate,
    merge_changes,
    partition_branch,
    run_branch,
)
from agent_fleet.changes.scope import out_of_scope
from agent_fleet.changes.workspace_changes import RunChanges

__all__ = [
    "Applied",
    "Change",
    "FileChange",
    "Identity",
    "Integration",
    "Placed",
    "Planned",
    "Refusal",
    "RunBase",
    "RunChanges",
    "apply_run",
    "base_missing",
    "capture",
    "commit_changes",
    "find_base",
    "integrate",
    "merge_changes",
    "out_of_scope",
    "partition_branch",
    "run_branch",
]
