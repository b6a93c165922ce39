"""Directory inputs against git itself: random trees and .gitignore files, listed as ``git ls-files``
lists them (git runs as a subprocess: the reference for ignore semantics)."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from agent_fleet.decompose import decompose
from agent_fleet.domain.plan import Plan


def write(root: Path, rel: str, content: str | bytes = "x = 1\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def files_of(plan: Plan) -> list[str]:
    return [item for p in plan.partitions for item in p.items]


POOL = [
    "*.log",
    "build/",
    "/top.py",
    "*.txt",
    "!keep.txt",
    "sub*/",
    "a/**/z.py",
    "**/gen",
    "doc/*.md",
    "!doc/keep.md",
    "x?.py",
    "[ab].py",
    "!b.py",
    "deep/",
    "!deep/",
    "*.md",
    "!README.md",
    "# a comment",
    "",
    "nested/only.py",
]
NAMES = ["a.py", "b.py", "x1.py", "z.py", "top.py", "keep.txt", "n.txt", "r.log", "README.md", "m.md", "only.py"]
NAMES += ["build", "gen", "deep", "sub2"]  # files named like directory patterns: "build/" must not match them
DIRS = ["", "a", "a/b", "a/b/c", "doc", "build", "sub1", "gen", "src/gen", "deep", "nested", "x/nested"]
DIR_PATHS = {"/".join(d.split("/")[: i + 1]) for d in DIRS if d for i in range(d.count("/") + 1)}


@pytest.mark.skipif(shutil.which("git") is None, reason="git is the reference for ignore semantics")
@pytest.mark.parametrize("seed", range(60))
def test_random_trees_match_git_ls_files(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    root = tmp_path / "repo"
    root.mkdir()
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=env)
    for d in DIRS:
        for name in rng.sample(NAMES, rng.randint(0, 6)):
            rel = f"{d}/{name}" if d else name
            if rel not in DIR_PATHS:  # a file cannot share its path with a directory
                write(root, rel, f"{d} {name}\n")
    for d in rng.sample(DIRS, rng.randint(2, 7)):
        write(root, f"{d}/.gitignore" if d else ".gitignore", "\n".join(rng.sample(POOL, rng.randint(2, 8))) + "\n")
    if rng.random() < 0.5:
        write(root, ".git/info/exclude", rng.choice(POOL) + "\n")
    listed = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard", "-z"],
        cwd=root,
        env=env,
        check=True,
        capture_output=True,
    ).stdout.decode()
    expected = sorted(p for p in listed.split("\0") if p)
    if not expected:
        write(root, "fallback.py")
        expected = ["fallback.py"]
    plan = decompose("t", root, agents=rng.randint(1, 8))
    assert sorted(files_of(plan)) == expected
