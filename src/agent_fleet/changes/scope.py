"""What of a change lies outside its partition (SPEC.md "Changes": such a change is not merged).

A partition's paths are its items, relative to the input directory; a change's paths are relative
to the repository's top. The input directory's place in the repository (``prefix``, e.g. ``pkg/``
or empty) joins the two. A path is in scope only when it is one of the partition's own files: a
file the session created elsewhere, or changed in another partition's files, is out of scope.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["out_of_scope", "repo_path"]


def repo_path(prefix: str, item: str) -> str:
    """A partition item (relative to the input directory) as a path relative to the repository."""
    item = item.strip().removeprefix("./")
    return f"{prefix.rstrip('/')}/{item}" if prefix.strip("/") else item


def out_of_scope(paths: Iterable[str], items: Iterable[str], prefix: str = "") -> tuple[str, ...]:
    """The ``paths`` (repository-relative) that are not among the partition's ``items``, sorted."""
    allowed = {repo_path(prefix, i) for i in items}
    return tuple(sorted({p for p in paths if p not in allowed}))
