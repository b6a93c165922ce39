"""Capturing a session's change from its worktree, with real git: every kind of path change, the
agent's own commits, what is never part of a change, and what is refused — never corrupted."""

from __future__ import annotations

import os
from pathlib import Path

from gitrepo import checkout_state, git, make_repo, worktree

from agent_fleet.changes import Identity, Planned, capture, commit_changes
from agent_fleet.changes.capture import parse_diff

LIMITS = {"max_file_bytes": 4096, "max_patch_bytes": 1 << 20}
FILES: dict[str, bytes | str] = {
    "pkg/a.py": "def a():\n    return 1\n",
    "pkg/b.py": "def b():\n    return 2\n",
    "pkg/c.py": "".join(f"line {i}\n" for i in range(20)),
    "tool.sh": "#!/bin/sh\necho hi\n",
    "data.bin": bytes(range(256)) * 4,
    "gone.txt": "to be deleted\n",
}


def _setup(tmp_path: Path) -> tuple[Path, str, Path, Path]:
    repo, base = make_repo(tmp_path, FILES)
    wt, gitdir = worktree(repo, tmp_path / "wt", base)
    return repo, base, wt, gitdir


def test_every_kind_of_path_change_is_captured_with_its_status(tmp_path: Path) -> None:
    repo, base, wt, gitdir = _setup(tmp_path)
    (wt / "pkg/a.py").write_text("def a():\n    return 10\n")  # modified
    (wt / "pkg/new.py").write_text("NEW = 1\n")  # added
    (wt / "gone.txt").unlink()  # deleted
    git(wt, "mv", "pkg/c.py", "pkg/c2.py")  # renamed, content kept
    os.chmod(wt / "tool.sh", 0o755)  # mode only
    (wt / "data.bin").write_bytes(bytes(reversed(range(256))) * 4)  # binary, modified
    (wt / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(200)))  # binary, added
    os.symlink("pkg/a.py", wt / "link")  # a symbolic link, added
    before = checkout_state(repo)
    change = capture(wt, gitdir=gitdir, base=base, **LIMITS)
    status = {f.path: f.status for f in change.files}
    assert status == {
        "pkg/a.py": "modified",
        "pkg/new.py": "added",
        "gone.txt": "deleted",
        "pkg/c2.py": "renamed",
        "tool.sh": "mode",
        "data.bin": "modified",
        "img.png": "added",
        "link": "added",
    }
    by = {f.path: f for f in change.files}
    assert by["pkg/c2.py"].old_path == "pkg/c.py"
    assert by["tool.sh"].mode == "100755" and by["link"].mode == "120000"
    assert by["data.bin"].binary and by["img.png"].binary
    assert (by["pkg/a.py"].insertions, by["pkg/a.py"].deletions) == (1, 1)
    assert by["gone.txt"].deletions == 1 and by["gone.txt"].blob == ""
    assert change.refused == ()
    assert b"GIT binary patch" in change.patch and b"rename from pkg/c.py" in change.patch
    assert checkout_state(repo) == before  # the user's checkout, index and HEAD untouched


def test_the_patch_alone_rebuilds_exactly_the_worktree_on_another_clone(tmp_path: Path) -> None:
    repo, base, wt, gitdir = _setup(tmp_path)
    (wt / "pkg/a.py").write_text("def a():\n    return 10\n")
    (wt / "data.bin").write_bytes(os.urandom(900))
    (wt / "blob.bin").write_bytes(os.urandom(700))
    git(wt, "mv", "pkg/c.py", "pkg/c2.py")
    os.chmod(wt / "tool.sh", 0o755)
    change = capture(wt, gitdir=gitdir, base=base, **LIMITS)
    git(wt, "add", "-A")
    tree_here = git(wt, "write-tree")  # what git itself makes of the worktree
    # A clone that never saw the session's objects: the branch is made from the patch alone.
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--no-local", str(repo), str(clone))
    planned = [Planned("run-x.s00000", "p0000", change)]
    ident = Identity(when=1_700_000_000)
    there = commit_changes(clone, run_id="run-x", base=base, identity=ident, task="t", planned=planned)[0]
    here = commit_changes(repo, run_id="run-x", base=base, identity=ident, task="t", planned=planned)[0]
    assert there.reason is None and there.commit is not None
    assert there.commit == here.commit  # the same change gives the same commit, on any machine
    assert git(clone, "rev-parse", f"{there.commit}^{{tree}}") == tree_here
    assert git(clone, "rev-parse", "fleet/run-x.p0000") == there.commit


def test_the_agents_own_commits_are_part_of_its_change(tmp_path: Path) -> None:
    _repo, base, wt, gitdir = _setup(tmp_path)
    (wt / "pkg/a.py").write_text("def a():\n    return 3\n")
    git(wt, "commit", "-q", "-am", "agent commit")  # as aider does
    (wt / "pkg/b.py").write_text("def b():\n    return 4\n")  # and an uncommitted edit after it
    change = capture(wt, gitdir=gitdir, base=base, **LIMITS)
    assert sorted(f.path for f in change.files) == ["pkg/a.py", "pkg/b.py"]


def test_ignored_caches_and_scratch_files_are_not_part_of_a_change(tmp_path: Path) -> None:
    repo, base = make_repo(tmp_path, {**FILES, ".gitignore": "build/\n", "pkg/__pycache__/old.pyc": b"\0tracked"})
    wt, gitdir = worktree(repo, tmp_path / "wt", base)
    (wt / "build").mkdir()
    (wt / "build/out.o").write_bytes(b"\0")  # the repository ignores it
    (wt / "pkg/__pycache__/a.cpython-311.pyc").write_bytes(b"\0")  # a cache, untracked
    (wt / ".pytest_cache").mkdir()
    (wt / ".pytest_cache/v").write_text("x")
    (wt / ".fleet-partition.txt").write_text("pkg/a.py\n")  # the sandbox's own
    (wt / "pkg/__pycache__/old.pyc").write_bytes(b"\0changed")  # tracked: its change still counts
    change = capture(wt, gitdir=gitdir, base=base, ignore=("/.fleet-*",), **LIMITS)
    assert [f.path for f in change.files] == ["pkg/__pycache__/old.pyc"]


def test_an_oversized_file_and_a_nested_repository_are_refused_and_the_rest_is_carried(tmp_path: Path) -> None:
    repo, base, wt, gitdir = _setup(tmp_path)
    (wt / "pkg/a.py").write_text("def a():\n    return 5\n")
    (wt / "big.txt").write_text("x" * 5000)  # over the 4,096-byte limit
    (wt / "data.bin").write_bytes(os.urandom(8000))  # a tracked file grown over the limit
    nested = wt / "vendor/lib"
    nested.mkdir(parents=True)
    git(nested, "init", "-q")
    (nested / "f").write_text("f\n")
    git(nested, "add", "f")
    git(nested, "commit", "-q", "-m", "nested")
    change = capture(wt, gitdir=gitdir, base=base, **LIMITS)
    assert [f.path for f in change.files] == ["pkg/a.py"]
    reasons = {r.path: r.reason for r in change.refused}
    assert set(reasons) == {"big.txt", "data.bin", "vendor/lib"}
    assert "5,000 bytes, over the 4,096-byte limit" in reasons["big.txt"]
    assert "nested git repository" in reasons["vendor/lib"]
    assert b"big.txt" not in change.patch and b"data.bin" not in change.patch
    committed = commit_changes(
        repo,
        run_id="run-x",
        base=base,
        identity=Identity(when=1),
        task="t",
        planned=[Planned("run-x.s00000", "p0000", change)],
    )[0]
    assert git(repo, "rev-parse", f"{committed.commit}:data.bin") == git(repo, "rev-parse", f"{base}:data.bin")


def test_a_patch_over_the_limit_refuses_the_change_as_a_whole(tmp_path: Path) -> None:
    _repo, base, wt, gitdir = _setup(tmp_path)
    for i in range(20):
        (wt / f"f{i}.txt").write_text(f"{i}\n" * 300)
    change = capture(wt, gitdir=gitdir, base=base, max_file_bytes=4096, max_patch_bytes=10_000)
    assert len(change.files) == 20 and change.patch == b"" and not change.carried
    assert "over the 10,000-byte limit" in change.note


def test_a_tampered_change_is_refused_rather_than_committed_different(tmp_path: Path) -> None:
    repo, base, wt, gitdir = _setup(tmp_path)
    (wt / "pkg/a.py").write_text("def a():\n    return 6\n")
    change = capture(wt, gitdir=gitdir, base=base, **LIMITS)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--no-local", str(repo), str(clone))
    bad = change.patch.replace(b"return 6", b"return 7")
    from agent_fleet.changes import Change

    tampered = Change(change.base, change.files, bad)
    placed = commit_changes(
        clone, run_id="run-x", base=base, identity=Identity(when=1), task="t", planned=[Planned("s", "p0000", tampered)]
    )[0]
    assert placed.commit is None and placed.reason is not None and "does not reproduce" in placed.reason
    assert git(clone, "branch", "--list", "fleet/*") == ""


def test_an_unchanged_worktree_gives_an_empty_change(tmp_path: Path) -> None:
    _repo, base, wt, gitdir = _setup(tmp_path)
    change = capture(wt, gitdir=gitdir, base=base, **LIMITS)
    assert change.empty and change.patch == b""
    assert parse_diff(b"") == ([], b"")


def test_the_change_event_round_trips_text_in_another_encoding_byte_for_byte(tmp_path: Path) -> None:
    _repo, base, wt, gitdir = _setup(tmp_path)
    (wt / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    change = capture(wt, gitdir=gitdir, base=base, **LIMITS)
    data = change.to_event()
    assert "patch_base64" in data and "patch" not in data
    from agent_fleet.changes import Change

    assert Change.from_event(data).patch == change.patch


def test_an_edit_in_the_same_second_as_the_checkout_is_seen(tmp_path: Path) -> None:
    # The same size, within the same second as the worktree's index: only the index's own date
    # tells git the file's stat data cannot be trusted.
    repo, base = make_repo(tmp_path, {"a.py": "x = 1\n"})
    for n in range(5):
        wt, gitdir = worktree(repo, tmp_path / f"wt{n}", base)
        (wt / "a.py").write_text(f"x = {n + 2}\n")
        change = capture(wt, gitdir=gitdir, base=base, **LIMITS)
        assert [f.path for f in change.files] == ["a.py"], n
