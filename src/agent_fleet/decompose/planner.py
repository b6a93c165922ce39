"""Task + input → a plan whose leaves are exclusive partitions, one agent session each.

1. Read the input into items with estimated tokens (``read_items``).
2. Cut the items, in order, into ``N = min(agents, items)`` contiguous groups balanced by tokens; for a
   codebase, cuts prefer directory boundaries (the shallower the better) when that costs little balance.
3. Halve any group whose content exceeds the content limit (``budget_tokens * content_fraction``), recursively,
   until every leaf fits. A single item over the limit cannot be split: it becomes a leaf of its own and a note
   says so. The number of leaves may therefore exceed ``agents``.
4. Number the leaves ``p0000``, ``p0001``, … left to right, label them, give them their toolset, and check the
   invariant: every input item is in exactly one leaf.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

from agent_fleet.decompose.cuts import balanced_cuts, prefix_sums
from agent_fleet.decompose.decompose_options import DecomposeOptions
from agent_fleet.decompose.layout import common_directory, cut_costs
from agent_fleet.decompose.read import read_items
from agent_fleet.decompose.source import InputSource
from agent_fleet.decompose.task_items import items_in_task
from agent_fleet.domain.plan import InputKind, Partition, Plan, PlanNode
from agent_fleet.errors import InputError

__all__ = ["DIRECTORY_TOOLS", "URL_TOOLS", "decompose", "plan_source"]

DIRECTORY_TOOLS: tuple[str, ...] = ("read_file", "list_files", "grep")
URL_TOOLS: tuple[str, ...] = ("fetch_url",)

# Items never contain a newline, so the joined partition is one http(s) URL per line exactly when this matches.
# \S cannot match the separator, so the match is linear (no backtracking between items).
_URL_LINES = re.compile(r"(?:https?://\S+\n)*https?://\S+", re.IGNORECASE)
_MAX_OVERSIZE_NOTES = 20


def decompose(
    task: str,
    input_path: str | Path | None,
    *,
    agents: int,
    budget_tokens: int = 128_000,
    options: DecomposeOptions | None = None,
) -> Plan:
    """Decompose ``task`` over the input at ``input_path`` (None: the task alone) for ``agents`` agents.

    Raises InputError (one readable line) for a bad argument or a missing, unreadable, malformed or empty input.
    The returned plan has passed :meth:`Plan.check`.
    """
    if agents < 1:
        raise InputError(f"agents must be at least 1, got {agents}")
    if budget_tokens < 1:
        raise InputError(f"budget_tokens must be at least 1, got {budget_tokens}")
    if not task.strip():
        raise InputError("the task is empty")
    opts = options or DecomposeOptions()
    source = read_items(input_path, opts)
    if input_path is None:
        task, source = _source_from_task(task, source, agents, opts)
    plan = plan_source(task, source, agents=agents, budget_tokens=budget_tokens, options=opts)
    plan.check()
    return plan


def plan_source(task: str, source: InputSource, *, agents: int, budget_tokens: int, options: DecomposeOptions) -> Plan:
    """Partition items already read (see :func:`decompose`, which also validates and checks the result)."""
    n = len(source.items)
    if n == 0:
        return _task_only(task, source, budget_tokens)
    is_dir = source.kind is InputKind.DIRECTORY
    prefix = prefix_sums(source.tokens)
    cost = cut_costs(source.items) if is_dir else None
    slack = options.boundary_slack if is_dir else 0.0
    limit = options.content_limit(budget_tokens)
    leaves: list[tuple[int, int]] = []

    def build(a: int, b: int, node_id: str) -> PlanNode:
        # Leaves are created left to right, so a leaf's position in `leaves` is its partition index.
        weight = prefix[b] - prefix[a]
        if weight <= limit or b - a == 1:
            pid = _partition_id(len(leaves))
            leaves.append((a, b))
            return PlanNode(id=pid, est_tokens=weight, items=b - a, leaf=pid)
        _, mid, _ = balanced_cuts(prefix, a, b, 2, cost=cost, slack=slack)
        left = build(a, mid, f"{node_id}.0")
        right = build(mid, b, f"{node_id}.1")
        return PlanNode(id=node_id, est_tokens=weight, items=b - a, children=(left, right))

    groups = list(pairwise(balanced_cuts(prefix, 0, n, min(agents, n), cost=cost, slack=slack)))
    children = tuple(build(a, b, f"g{g:04d}") for g, (a, b) in enumerate(groups))
    root = PlanNode(id="root", est_tokens=prefix[n], items=n, children=children)

    partitions = tuple(_partition(source, i, a, b, prefix[b] - prefix[a]) for i, (a, b) in enumerate(leaves))
    notes = list(source.notes)
    split = sum(1 for c in children if c.leaf is None)
    if split:
        notes.append(
            f"{split} of {len(groups)} partition(s) exceeded the content limit of {limit} tokens "
            f"({options.content_fraction:g} of the {budget_tokens}-token session budget) and were split: "
            f"{len(partitions)} sessions for {agents} agent(s)"
        )
    notes.extend(_oversize_notes(partitions, limit))
    return Plan(
        task=task,
        kind=source.kind,
        input_path=source.path,
        total_items=n,
        partitions=partitions,
        root=root,
        budget_tokens=budget_tokens,
        notes=tuple(notes),
    )


def _partition(source: InputSource, index: int, a: int, b: int, est_tokens: int) -> Partition:
    items = tuple(source.items[a:b])
    return Partition(
        id=_partition_id(index),
        index=index,
        kind=source.kind,
        items=items,
        item_ids=tuple(range(a, b)),
        est_tokens=est_tokens,
        label=_label(source, a, b),
        tools=_tools(source.kind, items),
    )


def _partition_id(index: int) -> str:
    return f"p{index:04d}"


def _label(source: InputSource, a: int, b: int) -> str:
    if source.kind is InputKind.DIRECTORY:
        return source.items[a] if b - a == 1 else common_directory(source.items[a], source.items[b - 1])
    if source.lines:
        first, last = source.lines[a], source.lines[b - 1]
        return f"line {first}" if first == last else f"lines {first}–{last}"
    return f"item {a + 1}" if b - a == 1 else f"items {a + 1}–{b}"  # a source built without line numbers


def _tools(kind: InputKind, items: Sequence[str]) -> tuple[str, ...]:
    if kind is InputKind.DIRECTORY:
        return DIRECTORY_TOOLS
    if kind is InputKind.LIST and items and _URL_LINES.fullmatch("\n".join(items)):
        return URL_TOOLS
    return ()


def _oversize_notes(partitions: Sequence[Partition], limit: int) -> list[str]:
    over = [p for p in partitions if p.est_tokens > limit]
    notes = [
        f"{p.id} ({p.label}) is one item of ~{p.est_tokens} tokens, over the content limit of {limit}: "
        "it cannot be split, so its session may exceed its budget"
        for p in over[:_MAX_OVERSIZE_NOTES]
    ]
    if len(over) > _MAX_OVERSIZE_NOTES:
        notes.append(f"… and {len(over) - _MAX_OVERSIZE_NOTES} more single-item partition(s) over the limit")
    return notes


def _source_from_task(task: str, empty: InputSource, agents: int, opts: DecomposeOptions) -> tuple[str, InputSource]:
    """No input: the items written in the task (URLs, a list, paths) become the input, one per line; the
    plan's task is the instruction without them, so each session sees only its own. Else the task alone,
    and a note says why one session."""
    found = items_in_task(task)
    if found is None:
        why = "no --input and the task names no URLs, list items or paths to split: one session works on the task"
        return task, replace(empty, notes=(*empty.notes, why))
    items = list(found.items)
    sessions = min(agents, len(items))
    note = (
        f"{len(items)} {found.what} written in the task, each in exactly one partition: "
        f"{sessions} session(s) for {agents} agent(s)"
    )
    tokens = [max(1, math.ceil(len(i) / opts.chars_per_token)) for i in items]
    source = InputSource(InputKind.LIST, None, items, tokens, notes=(note,))
    return found.instruction or task, source


def _task_only(task: str, source: InputSource, budget_tokens: int) -> Plan:
    """No input: one session works on the task alone."""
    pid = _partition_id(0)
    part = Partition(id=pid, index=0, kind=source.kind, items=(), item_ids=(), est_tokens=0, label="task")
    root = PlanNode(id="root", est_tokens=0, items=0, children=(PlanNode(id=pid, est_tokens=0, items=0, leaf=pid),))
    return Plan(
        task=task,
        kind=source.kind,
        input_path=source.path,
        total_items=0,
        partitions=(part,),
        root=root,
        budget_tokens=budget_tokens,
        notes=source.notes,
    )
