"""Pick the reader for an input path."""

from __future__ import annotations

from pathlib import Path

from agent_fleet.decompose.codebase import read_codebase
from agent_fleet.decompose.decompose_options import DecomposeOptions
from agent_fleet.decompose.lists import read_csv, read_jsonl, read_lines
from agent_fleet.decompose.source import InputSource
from agent_fleet.domain.plan import InputKind
from agent_fleet.errors import InputError

__all__ = ["read_items"]

_JSONL_SUFFIXES = frozenset({".jsonl", ".ndjson"})


def read_items(path: str | Path | None, options: DecomposeOptions | None = None) -> InputSource:
    """Read an input: a directory (a codebase), a .jsonl/.ndjson or .csv file, or any other file as a list of
    lines; None gives an input with no items (the task alone). Raises InputError with a one-line message when
    the input is missing, unreadable, malformed or empty."""
    opts = options or DecomposeOptions()
    if path is None:
        return InputSource(kind=InputKind.NONE, path=None, items=(), tokens=())
    p = Path(path)
    try:
        is_dir, is_file = p.is_dir(), p.is_file()
    except OSError as e:  # e.g. a name too long for the file system
        raise InputError(f"cannot read input {path}: {e.strerror or e}") from None
    if is_dir:
        return read_codebase(p, opts)
    if not is_file:
        if p.exists() or p.is_symlink():
            raise InputError(f"input is neither a regular file nor a directory: {path}")
        raise InputError(f"input not found: {path}")
    suffix = p.suffix.lower()
    if suffix in _JSONL_SUFFIXES:
        return read_jsonl(p, opts)
    if suffix == ".csv":
        return read_csv(p, opts)
    return read_lines(p, opts)
