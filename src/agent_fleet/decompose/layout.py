"""Where a codebase's files sit: the price of cutting between two files, and a partition's label.

Paths are in walk order (a directory's files, then its subdirectories, depth first), so a directory's files are
contiguous and so is every subtree.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["common_directory", "cut_costs"]


def cut_costs(paths: Sequence[str]) -> list[int]:
    """``cost[i]`` prices a cut just before ``paths[i]``: the number of directories the two neighbours share,
    plus one more when they sit in the same directory. 0 is a cut between top-level entries (the cheapest);
    splitting one directory's files costs more than any cut between its subdirectories."""
    costs = [0] * (len(paths) + 1)
    prev = paths[0].split("/")[:-1] if paths else []
    for i in range(1, len(paths)):
        cur = paths[i].split("/")[:-1]
        if cur == prev:
            costs[i] = len(cur) + 1
        else:
            shared = 0
            for x, y in zip(prev, cur, strict=False):
                if x != y:
                    break
                shared += 1
            costs[i] = shared
        prev = cur
    return costs


def common_directory(first: str, last: str) -> str:
    """The deepest directory holding both paths (and, in walk order, everything between them); "." for the
    root. When that is the root but the paths lie in different top-level directories, both are named."""
    a, b = first.split("/")[:-1], last.split("/")[:-1]
    shared: list[str] = []
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        shared.append(x)
    if shared:
        return "/".join(shared)
    top_a, top_b = (a[0] if a else "."), (b[0] if b else ".")
    return "." if top_a == top_b else f"{top_a} … {top_b}"
