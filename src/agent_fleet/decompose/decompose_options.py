"""Decomposition settings and the token estimate every reader shares."""

from __future__ import annotations

import math
from dataclasses import dataclass

from agent_fleet.errors import UsageError

__all__ = ["DecomposeOptions", "estimate_tokens"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DecomposeOptions:
    """How an input is read and cut. Value equality; every field has a sensible default."""

    # Directory inputs: larger files are skipped and noted (they rarely are source a session should read whole).
    max_file_bytes: int = 256 * 1024
    # Share of the session token budget one partition's own content may take. A session re-sends its context
    # on every turn, so the content must leave room for the task, tool results and the answers.
    content_fraction: float = 0.25
    # Rough size of a token in characters; the estimate only has to rank and bound, not to bill.
    chars_per_token: float = 4.0
    # Directory inputs: a cut at a directory boundary may make the largest partition this much larger
    # (relative to the best possible largest partition) before a cut inside a directory is preferred.
    boundary_slack: float = 0.15
    # How many skipped files `Plan.notes` names one by one; the rest are counted by reason.
    max_listed_skips: int = 20
    # Directory inputs: honour .gitignore files (root and nested) and .git/info/exclude.
    use_gitignore: bool = True

    def __post_init__(self) -> None:
        if self.max_file_bytes < 1:
            raise UsageError(f"max_file_bytes must be at least 1, got {self.max_file_bytes}")
        if not 0 < self.content_fraction <= 1:
            raise UsageError(f"content_fraction must be in (0, 1], got {self.content_fraction}")
        if not self.chars_per_token > 0:
            raise UsageError(f"chars_per_token must be positive, got {self.chars_per_token}")
        if self.boundary_slack < 0:
            raise UsageError(f"boundary_slack must not be negative, got {self.boundary_slack}")
        if self.max_listed_skips < 0:
            raise UsageError(f"max_listed_skips must not be negative, got {self.max_listed_skips}")

    def content_limit(self, budget_tokens: int) -> int:
        """Most tokens one leaf's content may hold for a session budget of ``budget_tokens``."""
        return max(1, int(budget_tokens * self.content_fraction))


def estimate_tokens(text: str, chars_per_token: float = 4.0) -> int:
    """Estimated tokens of ``text``: its length over ``chars_per_token``, rounded up (0 only for "")."""
    return math.ceil(len(text) / chars_per_token)
