"""The push step: after a run's changes are integrated, its branches go to ``--push REMOTE``.

A refused or unreachable remote loses nothing: the run has ended and written its outputs, its
branches stay in the local repository, and the report carries the one-line reason (the CLI prints it
and exits 4); ``agent-fleet apply RUN_ID --push REMOTE`` pushes them later.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from agent_fleet.engine.gitrepo import input_repo
from agent_fleet.engine.remotes import push_run_branches
from agent_fleet.errors import GitRemoteError
from agent_fleet.options import RunOptions, RunReport

__all__ = ["push_after_run", "push_branches"]

_NOT_YET = ("paused", "interrupted")  # a run that has not ended pushes when it does


async def push_branches(input_path: str | None, remote: str, run_id: str) -> dict[str, Any]:
    """Push the run's branches from the repository of ``input_path`` to ``remote``:
    ``{remote, branches, error}`` (``error`` one line, or None). Never raises for the remote's answer."""
    repo = await asyncio.to_thread(input_repo, input_path)
    if repo is None:
        return {"remote": remote, "branches": [], "error": f"{input_path} is not in a git repository: nothing to push"}
    try:
        branches = await asyncio.to_thread(push_run_branches, repo.top, remote, run_id)
    except GitRemoteError as exc:
        return {"remote": remote, "branches": [], "error": str(exc)}
    return {"remote": remote, "branches": branches, "error": None}


async def push_after_run(report: RunReport, options: RunOptions, input_path: str | None) -> RunReport:
    """With ``--push``: the run's branches pushed once the run has ended; the outcome on the report."""
    if not options.push or report.status in _NOT_YET:
        return report
    return replace(report, push=await push_branches(input_path, options.push, report.run_id))
