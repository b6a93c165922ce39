"""Where a run's input may come from on a server: the caller's input folders, never the server's own files.

A submitted ``input_path`` (a relative one is taken from the server's working directory) is resolved
with every symbolic link followed and must then lie inside one of the caller's input roots: a team's
``teams.NAME.inputs`` (relative to fleet.yaml's folder), by default the folder ``inputs/NAME`` under
the server's working directory; the admin's root is the working directory itself. Whatever the roots
say, the server's own files are never an input: its store file (and SQLite's ``-wal``, ``-shm``,
``-journal`` beside it), its output folder ``.fleet``, fleet.yaml and the Kueue file it names, its TLS
key and certificate, and — for a team — every other team's input roots. A directory input must hold
none of them either.

Hard links. One file may have several names, and resolving links does not find them. Every regular
file of the input that has more than one name (link count above 1) has its names counted under the
caller's roots, the protected places left out; unless every one of its names is found there the input
is refused. A link a team made inside its own folders to a file of those folders is accepted; one to the
store, an output or another team's file is refused, whatever it is called. (The ``.git`` folder of a
repository is neither checked nor counted: agents never read it as a file.)

The decision is made before anything about the run is recorded (:class:`~agent_fleet.errors.Refused`:
HTTP 403, exit 2). A path outside the caller's roots is refused before anyone asks whether it exists,
so a refusal never says whether another team's file is there.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_fleet.config import TeamConfig
from agent_fleet.errors import ConfigError, Refused, UsageError

__all__ = ["DEFAULT_INPUTS", "MAX_ITEMS", "OUTPUT_DIR", "Confinement", "write_items"]

DEFAULT_INPUTS = "inputs"  # a team's default input folder: inputs/NAME under the server's directory
OUTPUT_DIR = ".fleet"  # the server's outputs (runs' reports, items written for A2A), under its directory
MAX_ITEMS = 100_000  # items one submission may carry
_SQLITE_SIDECARS = ("", "-wal", "-shm", "-journal")
_SKIPPED = ".git"


def _real(path: str | os.PathLike[str]) -> Path:
    return Path(os.path.realpath(path))


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or path.is_relative_to(folder)


@dataclass(frozen=True, slots=True)
class Confinement:
    """The input roots of every caller and the server's protected paths (each resolved once)."""

    workdir: Path
    teams: Mapping[str, tuple[Path, ...]]  # team → its input roots
    protected: tuple[Path, ...]  # the server's own files and folders

    @classmethod
    def build(
        cls,
        *,
        workdir: str | os.PathLike[str],
        teams: Mapping[str, TeamConfig],
        config_path: str | None,
        store_file: str | os.PathLike[str] | None,
        extra: Iterable[str | os.PathLike[str]] = (),
        create: bool = False,
    ) -> Confinement:
        """``extra``: more of the server's own files (its Kueue file, TLS key and certificate).
        ``create``: make the teams' default folders that do not exist yet. Raises ConfigError (one
        line) when a team's folder overlaps another's or holds (or lies in) one of the server's files."""
        base = _real(workdir)
        config_dir = _real(config_path).parent if config_path else base
        protected = [base / OUTPUT_DIR]
        if store_file is not None:
            protected += [_real(f"{store_file}{suffix}") for suffix in _SQLITE_SIDECARS]
        protected += [_real(p) for p in (config_path, *extra) if p]
        roots: dict[str, tuple[Path, ...]] = {}
        for name, team in sorted(teams.items()):
            given = [config_dir / p for p in team.inputs] or [base / DEFAULT_INPUTS / name]
            if create and not team.inputs:
                given[0].mkdir(parents=True, exist_ok=True)
            roots[name] = tuple(_real(p) for p in given)
        made = cls(base, roots, tuple(dict.fromkeys(protected)))
        made._check()
        return made

    def _check(self) -> None:
        for name, roots in self.teams.items():
            for root in roots:
                for p in self.protected:
                    if _inside(root, p) or _inside(p, root):
                        raise ConfigError(f"teams.{name}.inputs: {root} overlaps the server's own {p}")
                for other, theirs in self.teams.items():
                    if other != name and any(_inside(root, t) or _inside(t, root) for t in theirs):
                        raise ConfigError(f"teams.{name}.inputs: {root} overlaps team {other}'s input folders")

    def roots(self, team: str | None) -> tuple[Path, ...]:
        """The caller's input roots: its team's, or the server's directory for the admin."""
        return (self.workdir,) if team is None else self.teams.get(team, ())

    def fenced(self, team: str | None) -> tuple[Path, ...]:
        """What the caller may never read: the server's own files, and the other teams' folders."""
        others = [r for name, roots in self.teams.items() if name != team for r in roots]
        return self.protected if team is None else (*self.protected, *others)

    def confine(self, team: str | None, input_path: str) -> str:
        """The resolved path of ``input_path`` if the caller may use it as an input; Refused (or, for an
        allowed path that is not there, UsageError) otherwise. Reads the file system: call it off the
        event loop."""
        who = "the admin" if team is None else f"team {team}"
        roots, fenced = self.roots(team), self.fenced(team)
        real = _real(self.workdir / input_path)
        if not any(_inside(real, r) for r in roots):
            raise Refused(f"input {input_path!r} is outside {who}'s input folders ({_listed(roots, self.workdir)})")
        for p in fenced:
            if _inside(real, p):
                raise Refused(f"input {input_path!r} is one of the server's own files or another team's")
        try:
            mode = real.stat().st_mode
        except OSError:
            raise UsageError(f"input {input_path!r} does not exist on the server") from None
        if stat.S_ISDIR(mode):
            for p in fenced:
                if _inside(p, real):
                    raise Refused(f"input {input_path!r} holds the server's own files or another team's folder")
        linked = dict(_linked(real))
        if linked:
            named = _count_names(roots, fenced, set(linked))
            for key, (path, links) in sorted(linked.items(), key=lambda kv: str(kv[1][0])):
                if named.get(key, 0) < links:
                    shown = input_path if path == real else str(Path(input_path) / path.relative_to(real))
                    raise Refused(
                        f"input {shown!r} is a hard link to a file outside {who}'s input folders; copy it instead"
                    )
        return str(real)


def _listed(roots: tuple[Path, ...], base: Path) -> str:
    return ", ".join(str(r.relative_to(base)) if r.is_relative_to(base) else str(r) for r in roots) or "none"


def _files(top: Path, skip: tuple[Path, ...] = ()) -> Iterator[os.DirEntry[str]]:
    """Every regular file under ``top`` (no link followed; ``.git`` and the folders and files of ``skip``
    left out)."""
    stack = [str(top)]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                entries = list(it)
        except OSError:
            continue
        for entry in entries:
            if skip and Path(entry.path) in skip:
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != _SKIPPED:
                        stack.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    yield entry
            except OSError:
                continue


def _linked(real: Path) -> Iterator[tuple[tuple[int, int], tuple[Path, int]]]:
    """The input's regular files with more than one name: (device, inode) → (path, link count)."""
    if real.is_file():
        st = real.stat()
        if st.st_nlink > 1:
            yield (st.st_dev, st.st_ino), (real, st.st_nlink)
        return
    for entry in _files(real):
        st = entry.stat(follow_symlinks=False)
        if st.st_nlink > 1:
            yield (st.st_dev, st.st_ino), (Path(entry.path), st.st_nlink)


def _count_names(
    roots: tuple[Path, ...], fenced: tuple[Path, ...], wanted: set[tuple[int, int]]
) -> dict[tuple[int, int], int]:
    """How many names each wanted (device, inode) has under ``roots``, the fenced places left out
    (a path under two nested roots counts once)."""
    found: dict[tuple[int, int], set[str]] = {}
    for root in dict.fromkeys(roots):
        for entry in _files(root, fenced):
            st = entry.stat(follow_symlinks=False)
            key = (st.st_dev, st.st_ino)
            if key in wanted:
                found.setdefault(key, set()).add(entry.path)
    return {key: len(paths) for key, paths in found.items()}


def write_items(directory: Path, name: str, items: list[Any]) -> Path:
    """``items`` as a run's input file in ``directory`` (the server's own: no caller may name it): a
    ``.txt`` of lines when every item is a one-line string, else ``.jsonl``, one JSON value per line.
    UsageError when ``items`` is no non-empty list of at most :data:`MAX_ITEMS`."""
    if not isinstance(items, list) or not items:
        raise UsageError("items: must be a non-empty list")
    if len(items) > MAX_ITEMS:
        raise UsageError(f"items: at most {MAX_ITEMS} in one run")
    directory.mkdir(parents=True, exist_ok=True)
    if all(isinstance(i, str) and i.strip() and "\n" not in i and "\r" not in i for i in items):
        path = directory / f"{name}.txt"
        path.write_text("".join(f"{i}\n" for i in items), encoding="utf-8")
    else:
        path = directory / f"{name}.jsonl"
        path.write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items), encoding="utf-8")
    return path
