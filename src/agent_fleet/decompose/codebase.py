"""Directory reader: a codebase becomes the list of its text files, walked deterministically.

Walk order: within a directory, its files (sorted by name), then its subdirectories (sorted), depth first. So
the files of one directory are contiguous and every subtree is contiguous, which lets the partitioner keep a
module together by cutting at directory boundaries.

Ignore rules follow git: ``.gitignore`` files at the root and in any subdirectory (patterns relative to their
own directory, a deeper file overriding a shallower one, the last matching pattern winning, ``!`` re-including)
and the root's ``.git/info/exclude`` (weakest). As in git, a file inside an excluded directory cannot be
re-included: excluded directories are not entered at all. ``.git`` itself is never read.

Skipped, and named in the plan's notes: symbolic links (they may point outside the input), special files, empty
files (nothing for a session to read), files over ``max_file_bytes``, binary files (a NUL byte in the first
8 KiB) and files that are not valid UTF-8.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from pathspec import GitIgnoreSpec

from agent_fleet.decompose.decompose_options import DecomposeOptions
from agent_fleet.decompose.source import InputSource
from agent_fleet.domain.plan import InputKind
from agent_fleet.errors import InputError

__all__ = ["read_codebase"]

_SNIFF_BYTES = 8192  # as git does: a NUL byte in the first 8 KiB marks a file binary

# (directory of the ignore file relative to the root, with a trailing "/" or "" for the root; its patterns)
_Rules = tuple[tuple[str, GitIgnoreSpec], ...]


@dataclass(slots=True)
class _Walk:
    paths: list[str] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)  # (path, category, detail)
    excluded: int = 0  # entries excluded by ignore rules (an excluded directory counts once)

    def skip(self, path: str, category: str, detail: str = "") -> None:
        self.skipped.append((path, category, detail))


def read_codebase(root: Path, opts: DecomposeOptions) -> InputSource:
    """Every text file under ``root`` not excluded by ignore rules; items are paths relative to ``root`` with
    "/" separators, tokens are estimated from each file's length plus its line in the prompt."""
    root = root.resolve()
    walk = _Walk()
    rules: _Rules = ()
    if opts.use_gitignore:
        exclude = _load_rules(root / ".git" / "info" / "exclude")
        if exclude is not None:
            rules = (("", exclude),)
    _walk(root, rules, opts, walk)
    notes = _skip_notes(walk, opts.max_listed_skips)
    if not walk.paths:
        summary = f" ({notes[0]})" if walk.skipped else ""
        raise InputError(f"input directory has no text files to work on: {root}{summary}")
    return InputSource(InputKind.DIRECTORY, str(root), walk.paths, walk.tokens, notes=notes)


def _walk(root: Path, base_rules: _Rules, opts: DecomposeOptions, walk: _Walk) -> None:
    cpt, limit = opts.chars_per_token, opts.max_file_bytes
    stack: list[tuple[str, str, _Rules]] = [(str(root), "", base_rules)]
    while stack:
        abs_dir, rel_dir, rules = stack.pop()
        try:
            with os.scandir(abs_dir) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as err:
            walk.skip(rel_dir or ".", "unreadable", f"directory: {err.strerror or err}")
            continue
        if opts.use_gitignore:
            for entry in entries:
                # git does not follow a .gitignore that is a symbolic link; neither do we.
                if entry.name == ".gitignore" and entry.is_file(follow_symlinks=False):
                    spec = _load_rules(Path(entry.path))
                    if spec is not None:
                        rules = (*rules, (rel_dir, spec))
                    break
        subdirs: list[tuple[str, str]] = []
        for entry in entries:
            if entry.name == ".git":
                continue
            rel = rel_dir + entry.name
            try:
                is_link = entry.is_symlink()
                is_dir = not is_link and entry.is_dir(follow_symlinks=False)
            except OSError as err:
                walk.skip(rel, "unreadable", err.strerror or str(err))
                continue
            if rules and _excluded(rel, is_dir, rules):
                walk.excluded += 1
                continue
            if is_dir:
                subdirs.append((entry.path, rel + "/"))
            elif is_link:
                walk.skip(rel, "symbolic link")
            else:
                _read_file(entry, rel, cpt, limit, walk)
        # Depth first in sorted order: the stack pops the first subdirectory next.
        stack.extend((path, rel, rules) for path, rel in reversed(subdirs))


def _read_file(entry: os.DirEntry[str], rel: str, cpt: float, limit: int, walk: _Walk) -> None:
    try:
        if not entry.is_file(follow_symlinks=False):
            walk.skip(rel, "not a regular file")
            return
        size = entry.stat(follow_symlinks=False).st_size
        if size == 0:
            walk.skip(rel, "empty")
            return
        if size > limit:
            walk.skip(rel, "too large", f"{size} bytes > {limit}")
            return
        with open(entry.path, "rb") as f:
            data = f.read(limit + 1)  # the file may have grown since stat
    except OSError as err:
        walk.skip(rel, "unreadable", err.strerror or str(err))
        return
    if len(data) > limit:
        walk.skip(rel, "too large", f"over {limit} bytes")
        return
    if b"\0" in data[:_SNIFF_BYTES]:
        walk.skip(rel, "binary")
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        walk.skip(rel, "binary", "not UTF-8")
        return
    walk.paths.append(rel)
    # The content a session reads, plus the "- path" line that names the file in its first message.
    walk.tokens.append(math.ceil(len(text) / cpt) + math.ceil((len(rel) + 3) / cpt))


def _excluded(rel: str, is_dir: bool, rules: _Rules) -> bool:
    """Deepest rules first; the first file with a matching pattern decides (its last match wins)."""
    suffix = "/" if is_dir else ""  # lets directory-only patterns ("build/") match
    for base, spec in reversed(rules):
        if base and not rel.startswith(base):
            continue
        result = spec.check_file(rel[len(base) :] + suffix)
        if result.include is not None:
            return bool(result.include)
    return False


def _load_rules(path: Path) -> GitIgnoreSpec | None:
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return None  # an unreadable ignore file excludes nothing, as in git
    spec = GitIgnoreSpec.from_lines(text.splitlines())
    return spec if len(spec) > 0 else None


def _skip_notes(walk: _Walk, max_listed: int) -> tuple[str, ...]:
    notes: list[str] = []
    if walk.skipped:
        by_category = Counter(category for _, category, _ in walk.skipped)
        counts = ", ".join(f"{n} {category}" for category, n in sorted(by_category.items()))
        notes.append(f"skipped {len(walk.skipped)} file(s): {counts}")
        for path, category, detail in walk.skipped[:max_listed]:
            notes.append(f"skipped {path}: {category}" + (f" ({detail})" if detail else ""))
        rest = len(walk.skipped) - max_listed
        if rest > 0:
            notes.append(f"… and {rest} more skipped file(s) not listed")
    if walk.excluded:
        notes.append(f"{walk.excluded} path(s) excluded by .gitignore rules")
    return tuple(notes)
