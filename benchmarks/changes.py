"""What keeping coding agents' changes costs, as a ratio against the bare git it is built on.

Per session, measured in the same run on the same worktrees and edits:
- **ours**: capture the worktree's change (``changes.capture``: the whole worktree against the base,
  untracked files and the agent's own commits included, sizes checked), then, for all sessions at
  once, commit each change on its own branch and merge them into the run's branch in partition order
  (``changes.integrate``);
- **baseline**: ``git diff --binary --full-index`` in each worktree (tracked files only), then
  ``git apply`` of every patch, one after the other, in one integration checkout.

Goal: ours ≤ 1.5 × the baseline, per session. The two sides run in turns (``_interleave``): each
round times both on the same worktrees, in alternating order, and gives one ratio; the figure is the
median of the rounds' ratios with their lowest and highest, in wall-clock time (the goal's) and in
CPU time (this process and its git processes), so load from elsewhere on the machine weighs on both
sides alike. Then 1,000 sessions' changes merged in one run (printed in seconds: commit each on its
branch, merge all into the run's branch).

Run: ``python benchmarks/changes.py [--files N] [--sessions N] [--merge N] [--rounds K]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from _interleave import interleave, load_average, spread
from agent_fleet.changes import Identity, Planned, capture, integrate

LIMITS = {"max_file_bytes": 2 << 20, "max_patch_bytes": 32 << 20}


def git(cwd: Path, *args: str, input: bytes | None = None) -> bytes:
    out = subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@e", *args], cwd=cwd, input=input, capture_output=True
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr.decode())
    return out.stdout


def make_repo(root: Path, files: int) -> tuple[Path, str]:
    repo = root / "repo"
    for i in range(files):
        p = repo / f"pkg{i % 20:02d}" / f"mod{i:05d}.py"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("".join(f"def f{i}_{k}(x):\n    return x + {k}\n\n" for k in range(30)))
    git(root, "init", "-q", str(repo))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    return repo, git(repo, "rev-parse", "HEAD").decode().strip()


def edit(wt: Path, i: int) -> None:
    """Session i's edit: a change inside its own module and a new test file beside it."""
    p = wt / f"pkg{i % 20:02d}" / f"mod{i:05d}.py"
    p.write_text(p.read_text().replace("return x + 3\n", "return x + 3  # checked\n"))
    (p.parent / f"test_mod{i:05d}.py").write_text(f"def test_{i}():\n    assert True\n")


def sessions(root: Path, repo: Path, base: str, n: int) -> list[tuple[Path, Path]]:
    out = []
    for i in range(n):
        wt = root / f"wt{i:04d}"
        git(repo, "worktree", "add", "-q", "--detach", str(wt), base)
        edit(wt, i)
        gitdir = Path(git(wt, "rev-parse", "--absolute-git-dir").decode().strip())
        out.append((wt, gitdir))
    return out


def run_baseline(target: Path, worktrees: list[tuple[Path, Path]]) -> None:
    """Each worktree's ``git diff``, applied with ``git apply --index`` in ``target`` (at the base)."""
    for wt, _ in worktrees:
        patch = git(wt, "diff", "--binary", "--full-index")
        git(target, "apply", "--index", "-", input=patch)


def run_ours(repo: Path, base: str, worktrees: list[tuple[Path, Path]], tag: str) -> float:
    """Capture every worktree, then integrate all; returns the seconds the captures took."""
    start = time.perf_counter()
    planned = [
        Planned(f"run-{tag}.s{i:05d}", f"p{i:04d}", capture(wt, gitdir=gitdir, base=base, **LIMITS))
        for i, (wt, gitdir) in enumerate(worktrees)
    ]
    captured = time.perf_counter() - start
    result = integrate(repo, run_id=f"run-{tag}", base=base, identity=Identity(when=1), task="t", planned=planned)
    assert all(p.merged for p in result.placed), result.placed[:3]
    return captured


def merge_many(root: Path, repo: Path, base: str, n: int) -> tuple[float, float]:
    """``n`` changes captured one after the other in one worktree, then merged in one run."""
    wt = root / "many"
    git(repo, "worktree", "add", "-q", "--detach", str(wt), base)
    gitdir = Path(git(wt, "rev-parse", "--absolute-git-dir").decode().strip())
    planned = []
    captured = 0.0
    for i in range(n):
        edit(wt, i)
        start = time.perf_counter()
        planned.append(Planned(f"run-many.s{i:05d}", f"p{i:04d}", capture(wt, gitdir=gitdir, base=base, **LIMITS)))
        captured += time.perf_counter() - start
        git(wt, "checkout", "-q", "--", ".")  # the next session's worktree: the base again
        git(wt, "clean", "-qfd")
    start = time.perf_counter()
    result = integrate(repo, run_id="run-many", base=base, identity=Identity(when=1), task="t", planned=planned)
    merged = time.perf_counter() - start
    assert sum(p.merged for p in result.placed) == n
    return captured, merged


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=1000, help="files in the repository")
    ap.add_argument("--sessions", type=int, default=40, help="sessions in each round of the ratio")
    ap.add_argument("--merge", type=int, default=1000, help="sessions' changes merged in one run")
    ap.add_argument("--rounds", type=int, default=9, help="rounds of both sides, in alternating order")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="fleet-bench-changes-"))
    try:
        repo, base = make_repo(root, max(args.files, args.merge))
        worktrees = sessions(root, repo, base, args.sessions)
        # Every round's baseline applies into its own checkout of the base, made before the timing.
        targets = [root / f"baseline-target{k:02d}" for k in range(args.rounds + 1)]
        for target in targets:
            git(repo, "worktree", "add", "-q", "--detach", str(target), base)
        captures: list[float] = []
        load_before = load_average()
        # One round first, not counted: both sides once on the same warm caches.
        run_baseline(targets[-1], worktrees)
        run_ours(repo, base, worktrees, "warm")
        rounds = interleave(
            args.rounds,
            lambda k: run_baseline(targets[k], worktrees),
            lambda k: captures.append(run_ours(repo, base, worktrees, f"r{k}")),
        )
        n = args.sessions
        files = max(args.files, args.merge)
        wall, cpu = spread([r.wall_ratio for r in rounds]), spread([r.cpu_ratio for r in rounds])
        b_ms = statistics.median(r.baseline.wall for r in rounds) / n * 1000
        o_ms = statistics.median(r.ours.wall for r in rounds) / n * 1000
        c_ms = statistics.median(captures) / n * 1000
        print(f"repository: {files:,} files; {n} sessions, each a 2-file change; {args.rounds} rounds in turns")
        print(f"machine: {load_before} before, {load_average()} after")
        print(f"baseline (git diff + git apply): {b_ms:7.2f} ms per session (median round)")
        print(f"capture + merge:                 {o_ms:7.2f} ms per session (capture {c_ms:.2f}, merge the rest)")
        print(f"ratio, wall clock: {wall} (goal <= 1.5x): {'met' if wall.median <= 1.5 else 'MISSED'}")
        print(f"ratio, CPU time:   {cpu}")
        captured, merged = merge_many(root, repo, base, args.merge)
        each = captured / args.merge * 1000
        print(f"{args.merge:,} sessions' changes: captured in {captured:.1f} s ({each:.1f} ms each)")
        print(f"  each committed on its branch and all merged into the run's branch in one run: {merged:.2f} s")
    finally:
        subprocess.run(["git", "-C", str(root / "repo"), "worktree", "prune"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("GIT_TERMINAL_PROMPT", "0")
    main()
