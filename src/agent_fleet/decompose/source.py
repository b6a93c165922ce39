"""What a reader hands the partitioner: the items of one input, in input order, with their estimated tokens."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from agent_fleet.domain.plan import InputKind

__all__ = ["InputSource"]


@dataclass(frozen=True, slots=True)
class InputSource:
    """The items of one input.

    Invariants: ``items``, ``tokens`` (and ``lines`` for list kinds) have the same length; an item never contains
    a newline or a carriage return, so one item is always one line; item ``i`` has id ``i``.
    """

    kind: InputKind
    path: str | None  # the resolved input path, None for a task-only run
    items: Sequence[str]  # verbatim lines / records, or file paths relative to the root with "/" separators
    tokens: Sequence[int]  # estimated tokens per item
    lines: Sequence[int] = ()  # list kinds: 1-based line of the input where each item starts
    notes: tuple[str, ...] = field(default=())  # e.g. skipped files and why
