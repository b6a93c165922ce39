"""The built-in agent's edits where a run makes changes: ``write_file``, ``edit_file`` and ``run`` in the
session's own git worktree, scoped to the partition's paths (SPEC.md "The built-in agent's tool
protocol"). Real git, real sandboxes; every escape attempt must come back as an error and write nothing."""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from _hands_support import git_repo, have_bwrap, make_provider, sandbox_root

from agent_fleet.domain.plan import InputKind, Partition
from agent_fleet.errors import ConfigError
from agent_fleet.hands.composite import CompositeHands
from agent_fleet.hands.port import Hands
from agent_fleet.hands.sandbox import LocalSandboxProvider
from agent_fleet.hands.toolbox import Toolbox
from agent_fleet.hands.workspace_io import MAX_EDIT_BYTES

MODE = os.environ.get("FLEET_TEST_SANDBOX_MODE") or ("bwrap" if have_bwrap() else "plain")
A = "def load(text, seen=[]):\n    try:\n        return parse(text)\n    except:\n        return None\n"


@pytest.fixture
def root() -> Iterator[Path]:
    with sandbox_root() as r:
        yield r


def part(items: tuple[str, ...]) -> Partition:
    return Partition(
        id="p0001", index=1, kind=InputKind.DIRECTORY, items=items, item_ids=tuple(range(len(items))), est_tokens=1
    )


def snapshot(top: Path) -> dict[str, str]:
    """Every file under ``top`` (the .git directory's objects aside) by its content digest."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if d != "objects"]
        for name in filenames:
            p = Path(dirpath) / name
            if not p.is_symlink():
                out[str(p.relative_to(top))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def setup(tmp: Path, root: Path, **files: str) -> tuple[Path, Toolbox, LocalSandboxProvider]:
    repo = git_repo(tmp / "repo", {"pkg/a.py": A, "pkg/b.py": "x = 1\n", "other.py": "y = 2\n", **files})
    provider = make_provider(MODE, root)
    return repo, Toolbox(run_id="run-1", input_root=repo, sandboxes=provider, edits=True), provider


def git(*args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"}
    # the worktree may belong to the sandbox's user
    return subprocess.run(
        ["git", "-c", "safe.directory=*", *args], capture_output=True, text=True, check=True, env=env
    ).stdout


def workdir_of(provider: LocalSandboxProvider) -> Path:
    (work,) = [p / "work" for p in provider.root.iterdir()]
    return work


async def ok(hands: Hands, name: str, **args: object) -> str:
    out = await hands.execute(name, dict(args))
    assert not out.is_error, out.output
    return out.output


async def test_edits_change_the_worktree_and_never_the_checkout(tmp_path: Path, root: Path) -> None:
    repo, box, provider = setup(tmp_path, root)
    before = snapshot(repo)
    hands = box.hands_for(part(("pkg/a.py", "pkg/b.py")))
    assert isinstance(hands, CompositeHands)
    names = [s.name for s in hands.specs()]
    assert names == ["read_file", "list_files", "grep", "write_file", "edit_file", "run"]
    try:
        said = await ok(hands, "edit_file", path="pkg/a.py", old="    except:\n", new="    except ValueError:\n")
        assert said == "replaced 1 occurrence in pkg/a.py at line 4"
        await ok(hands, "write_file", path="./pkg/b.py", content="x = 2\n")
        assert (await ok(hands, "read_file", path="pkg/b.py")) == "x = 2\n"
        assert (await ok(hands, "grep", pattern="except")) == "pkg/a.py:4: except ValueError:"
        # run: in the same worktree, seeing the edits
        shown = await ok(hands, "run", command="cat pkg/a.py pkg/b.py && pwd")
        assert "except ValueError:" in shown and "x = 2" in shown and "[exit code 0]" in shown
        work = workdir_of(provider)
        assert str(work) in shown
        assert (work / "pkg/a.py").read_text() == A.replace("except:", "except ValueError:")
        diff = git("-C", str(work), "diff", "--stat")
        assert "pkg/a.py" in diff and "pkg/b.py" in diff
    finally:
        await hands.aclose()
    assert snapshot(repo) == before  # the user's files, index and refs are byte-identical
    assert git("-C", str(repo), "status", "--porcelain") == ""


async def test_every_escape_is_refused_and_writes_nothing(tmp_path: Path, root: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.py"
    victim.write_text("secret = 1\n")
    repo, box, provider = setup(tmp_path, root)
    before, victim_before = snapshot(repo), snapshot(outside)
    hands = box.hands_for(part(("pkg/a.py", "pkg/b.py")))
    try:
        await ok(hands, "read_file", path="pkg/a.py")  # the worktree exists from here on
        work = workdir_of(provider)
        attempts = [
            "../outside/victim.py",
            "pkg/../other.py",
            "other.py",  # in the repository, not in the partition
            "pkg/new.py",  # a new file outside the partition's paths
            str(victim),  # absolute
            str(work / "pkg/a.py"),  # absolute, even into the worktree
            "",
        ]
        for path in attempts:
            for name, args in (("write_file", {"content": "pwned\n"}), ("edit_file", {"old": "x", "new": "pwned"})):
                out = await hands.execute(name, {"path": path, **args})
                assert out.is_error and out.output.startswith("error:"), (name, path, out)
        # links planted by the agent's own commands: the file itself, and a directory on the way
        await ok(hands, "run", command=f"rm pkg/b.py && ln -s {victim} pkg/b.py")
        for name, args in (
            ("write_file", {"content": "pwned\n"}),
            ("edit_file", {"old": "secret", "new": "pwned"}),
            ("read_file", {}),
        ):
            out = await hands.execute(name, {"path": "pkg/b.py", **args})
            assert out.is_error and "symbolic link" in out.output, (name, out)
        (outside / "a.py").write_text("secret = 2\n")
        await ok(hands, "run", command=f"mv pkg pkg.real && ln -s {outside} pkg")
        out = await hands.execute("write_file", {"path": "pkg/a.py", "content": "pwned\n"})
        assert out.is_error and "symbolic link" in out.output, out
        out = await hands.execute("edit_file", {"path": "pkg/a.py", "old": "secret", "new": "pwned"})
        assert out.is_error and "symbolic link" in out.output, out
        assert (outside / "a.py").read_text() == "secret = 2\n"
        (outside / "a.py").unlink()
    finally:
        await hands.aclose()
    assert snapshot(outside) == victim_before
    assert victim.read_text() == "secret = 1\n"
    assert snapshot(repo) == before


async def test_edit_file_needs_exactly_one_occurrence(tmp_path: Path, root: Path) -> None:
    text = "a = 1\nb = 1\nb = 1\naaa\n"
    _, box, provider = setup(tmp_path, root, **{"pkg/c.py": text})
    hands = box.hands_for(part(("pkg/c.py",)))
    try:
        for old, count in (("zzz", "does not occur"), ("b = 1\n", "occurs 2 times"), ("aa", "occurs 2 times")):
            out = await hands.execute("edit_file", {"path": "pkg/c.py", "old": old, "new": "Q"})
            assert out.is_error and count in out.output, out
        for bad in ({"old": "", "new": "Q"}, {"old": "a = 1", "new": "a = 1"}, {"old": 3, "new": "Q"}, {"new": "Q"}):
            out = await hands.execute("edit_file", {"path": "pkg/c.py", **bad})
            assert out.is_error, (bad, out)
        assert (workdir_of(provider) / "pkg/c.py").read_text() == text  # nothing changed by any of them
        await ok(hands, "edit_file", path="pkg/c.py", old="a = 1\nb = 1\n", new="a = 2\nb = 1\n")
        assert (workdir_of(provider) / "pkg/c.py").read_text() == "a = 2\nb = 1\nb = 1\naaa\n"
    finally:
        await hands.aclose()


async def test_binary_and_huge_files_are_refused_never_rewritten(tmp_path: Path, root: Path) -> None:
    huge = "# padding\n" * (MAX_EDIT_BYTES // 10 + 10)
    repo, box, provider = setup(tmp_path, root, **{"pkg/huge.py": huge})
    blob = bytes(range(256)) * 8
    (repo / "pkg/logo.png").write_bytes(blob)
    (repo / "pkg/latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    git("-C", str(repo), "add", "-A")
    git("-C", str(repo), "commit", "-qm", "binary")
    hands = box.hands_for(part(("pkg/logo.png", "pkg/latin1.txt", "pkg/huge.py")))
    try:
        for path in ("pkg/logo.png", "pkg/latin1.txt"):
            for name, args in (("read_file", {}), ("edit_file", {"old": "caf", "new": "CAF"})):
                out = await hands.execute(name, {"path": path, **args})
                assert out.is_error and ("binary" in out.output or "not UTF-8" in out.output), (path, name, out)
        out = await hands.execute("edit_file", {"path": "pkg/huge.py", "old": "# padding\n# padding", "new": "x"})
        assert out.is_error and "limit" in out.output, out
        read = await ok(hands, "read_file", path="pkg/huge.py")
        assert read.startswith("# padding\n") and "[truncated: the file has" in read
        out = await hands.execute("write_file", {"path": "pkg/latin1.txt", "content": "x" * (MAX_EDIT_BYTES + 1)})
        assert out.is_error and "limit" in out.output, out
        work = workdir_of(provider)
        assert (work / "pkg/logo.png").read_bytes() == blob
        assert (work / "pkg/latin1.txt").read_bytes() == "caf\xe9\n".encode("latin-1")
        assert (work / "pkg/huge.py").read_text() == huge
        # an explicit whole-file write of text is what it says
        await ok(hands, "write_file", path="pkg/latin1.txt", content="café\n")
        assert (work / "pkg/latin1.txt").read_text("utf-8") == "café\n"
    finally:
        await hands.aclose()


async def test_run_is_bounded_in_time(tmp_path: Path, root: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    box = Toolbox(run_id="run-1", input_root=repo, sandboxes=make_provider(MODE, root), edits=True, command_timeout=1)
    hands = box.hands_for(part(("a.py",)))
    try:
        started = time.monotonic()
        out = await hands.execute("run", {"command": "echo begun; sleep 30; echo never"})
        took = time.monotonic() - started
        assert out.is_error and "timed out" in out.output and "begun" in out.output and "never" not in out.output
        assert took < 20, took  # the command would take 30 s
        out = await hands.execute("run", {"command": "exit 3"})
        assert out.is_error and "[exit code 3]" in out.output
    finally:
        await hands.aclose()


async def test_a_new_attempt_gets_the_sessions_edits_back(tmp_path: Path, root: Path) -> None:
    """The edits a session made before it was interrupted are in the fresh worktree of its next attempt,
    and in the one replacing a sandbox that died."""
    repo, box, provider = setup(tmp_path, root)
    calls = [
        ("read_file", {"path": "pkg/a.py"}),
        ("edit_file", {"path": "./pkg/a.py", "old": "    except:\n", "new": "    except ValueError:\n"}),
        ("write_file", {"path": "pkg/b.py", "content": "x = 3\n"}),
        ("write_file", {"path": "other.py", "content": "refused: not in the partition\n"}),
    ]
    hands = box.hands_for(part(("pkg/a.py", "pkg/b.py")))
    assert isinstance(hands, CompositeHands)
    hands.replay(calls)
    try:
        assert "except ValueError:" in await ok(hands, "read_file", path="pkg/a.py")
        assert await ok(hands, "read_file", path="pkg/b.py") == "x = 3\n"
        await ok(hands, "edit_file", path="pkg/b.py", old="x = 3", new="x = 4")
        first = workdir_of(provider)
        assert not (first / "other.py").read_text().startswith("refused")
        # the sandbox dies: its workspace is gone; the next call gets a new one, with every edit
        await ok(hands, "run", command="true")
        git("-C", str(repo), "worktree", "remove", "--force", str(first))
        out = await hands.execute("run", {"command": "cat pkg/b.py pkg/a.py"})
        assert not out.is_error and "x = 4" in out.output and "except ValueError:" in out.output, out
        assert workdir_of(provider) != first
    finally:
        await hands.aclose()


async def test_write_tools_need_a_run_that_makes_changes(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    plain = Toolbox(run_id="run-1", input_root=tmp_path)
    assert [s.name for s in plain.hands_for(part(("a.py",))).specs()] == ["read_file", "list_files", "grep"]
    with pytest.raises(ConfigError, match="git repository"):
        plain.hands_for(replace(part(("a.py",)), tools=("write_file",)))
    with pytest.raises(ConfigError, match="sandbox provider"):
        Toolbox(run_id="run-1", input_root=tmp_path, edits=True).hands_for(part(("a.py",)))
