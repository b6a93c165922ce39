"""Decomposition plans: a tree whose leaves are agent sessions.

Invariant (checked by :meth:`Plan.check`): every input item is in exactly one leaf.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from agent_fleet.errors import PlanInvariantError

__all__ = ["InputKind", "Partition", "Plan", "PlanNode"]


class InputKind(StrEnum):
    DIRECTORY = "directory"  # items are file paths relative to the input root
    LIST = "list"  # items are lines of a .txt file
    JSONL = "jsonl"  # items are JSON records (one line each, verbatim)
    CSV = "csv"  # items are CSV records, rendered one per line
    NONE = "none"  # no input: the task alone


@dataclass(frozen=True, slots=True)
class Partition:
    """One leaf: what one agent session works on."""

    id: str  # e.g. "p0007"
    index: int  # leaf position, 0-based; the session id derives from it
    kind: InputKind
    items: tuple[str, ...]  # verbatim items (lines/records) or relative file paths
    item_ids: tuple[int, ...]  # positions of the items in the input
    est_tokens: int
    label: str = ""  # e.g. the directory/module a file group came from
    tools: tuple[str, ...] = ()  # the toolset this partition needs

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "index": self.index,
            "kind": str(self.kind),
            "items": list(self.items),
            "item_ids": list(self.item_ids),
            "est_tokens": self.est_tokens,
            "label": self.label,
            "tools": list(self.tools),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Partition:
        return cls(
            id=d["id"],
            index=int(d["index"]),
            kind=InputKind(d["kind"]),
            items=tuple(d["items"]),
            item_ids=tuple(int(i) for i in d["item_ids"]),
            est_tokens=int(d["est_tokens"]),
            label=d.get("label", ""),
            tools=tuple(d.get("tools", ())),
        )


@dataclass(frozen=True, slots=True)
class PlanNode:
    """An inner node or a leaf of the decomposition tree."""

    id: str
    est_tokens: int
    items: int
    children: tuple[PlanNode, ...] = ()
    leaf: str | None = None  # partition id when this node is a leaf

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "est_tokens": self.est_tokens, "items": self.items}
        if self.leaf is not None:
            d["leaf"] = self.leaf
        if self.children:
            d["children"] = [c.to_dict() for c in self.children]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PlanNode:
        return cls(
            id=d["id"],
            est_tokens=int(d["est_tokens"]),
            items=int(d["items"]),
            children=tuple(cls.from_dict(c) for c in d.get("children", ())),
            leaf=d.get("leaf"),
        )

    def depth(self) -> int:
        return 1 + max((c.depth() for c in self.children), default=0)


@dataclass(frozen=True, slots=True)
class Plan:
    task: str
    kind: InputKind
    input_path: str | None
    total_items: int
    partitions: tuple[Partition, ...]
    root: PlanNode
    budget_tokens: int
    notes: tuple[str, ...] = field(default=())  # e.g. skipped files and why

    def check(self) -> None:
        """Raise PlanInvariantError unless every input item is in exactly one leaf."""
        seen = Counter(i for p in self.partitions for i in p.item_ids)
        dup = sorted(i for i, n in seen.items() if n > 1)
        if dup:
            raise PlanInvariantError(f"items in more than one partition: {dup[:10]}")
        missing = sorted(set(range(self.total_items)) - set(seen))
        if missing:
            raise PlanInvariantError(f"items in no partition: {missing[:10]}")
        unknown = sorted(i for i in seen if not 0 <= i < self.total_items)
        if unknown:
            raise PlanInvariantError(f"item ids outside the input (0..{self.total_items - 1}): {unknown[:10]}")
        for idx, p in enumerate(self.partitions):
            if p.index != idx:
                raise PlanInvariantError(f"partition {p.id} has index {p.index}, expected {idx}")
            if len(p.items) != len(p.item_ids):
                raise PlanInvariantError(f"partition {p.id} items and item_ids differ in length")
        leaves = _leaves(self.root)
        if sorted(leaves) != sorted(p.id for p in self.partitions):
            raise PlanInvariantError("plan tree leaves differ from the partitions")

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "kind": str(self.kind),
            "input_path": self.input_path,
            "total_items": self.total_items,
            "partitions": [p.to_dict() for p in self.partitions],
            "root": self.root.to_dict(),
            "budget_tokens": self.budget_tokens,
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Plan:
        return cls(
            task=d["task"],
            kind=InputKind(d["kind"]),
            input_path=d.get("input_path"),
            total_items=int(d["total_items"]),
            partitions=tuple(Partition.from_dict(p) for p in d["partitions"]),
            root=PlanNode.from_dict(d["root"]),
            budget_tokens=int(d["budget_tokens"]),
            notes=tuple(d.get("notes", ())),
        )


def _leaves(node: PlanNode) -> list[str]:
    if node.leaf is not None:
        return [node.leaf]
    out: list[str] = []
    for c in node.children:
        out.extend(_leaves(c))
    return out
