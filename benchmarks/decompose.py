"""Decomposition speed on big inputs, as a ratio against merely reading the same input.

Baselines, measured in the same run on the same files:
- list input: read the file and split it into lines (``Path.read_text().splitlines()``);
- directory input: ``os.walk`` the tree and read every file's bytes (no ignore rules, no partitioning).

Figures (best of ``--repeat`` runs):
- a 1,000,000-line URL list into 1,000 partitions;
- the same list with a small session budget, so every group is split hierarchically;
- a 20,000-file tree (with .gitignore files and some binary files) into 100 partitions.

Run: ``python benchmarks/decompose.py [--lines N] [--files N] [--repeat K]``
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from agent_fleet.decompose import decompose

T = TypeVar("T")


def best_of(repeat: int, fn: Callable[[], T]) -> tuple[float, T]:
    start = time.perf_counter()
    result = fn()
    best = time.perf_counter() - start
    for _ in range(repeat - 1):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def make_list(path: Path, lines: int) -> None:
    rng = random.Random(1)
    with path.open("w", encoding="utf-8") as f:
        for i in range(lines):
            f.write(f"https://site{rng.randint(0, 999)}.example/{'a' * rng.randint(0, 60)}/page/{i}\n")


def make_tree(root: Path, files: int) -> None:
    rng = random.Random(2)
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    per_dir = 100
    for i in range(files):
        pkg, sub = divmod(i // per_dir, 10)
        d = root / f"pkg{pkg:03d}" / f"mod{sub}"
        if i % per_dir == 0:
            d.mkdir(parents=True, exist_ok=True)
            (d / ".gitignore").write_text("generated_*.py\n!generated_keep.py\n")
        name = rng.choice(["f{}.py", "f{}.py", "f{}.py", "f{}.log", "f{}.bin", "generated_{}.py"]).format(i)
        if name.endswith(".bin"):
            (d / name).write_bytes(b"\x00\x01" * rng.randint(10, 500))
        else:
            (d / name).write_text("x = 1  # some code\n" * rng.randint(1, 400))


def read_tree(root: Path) -> int:
    total = 0
    for dirpath, _, names in os.walk(root):
        for name in names:
            with open(os.path.join(dirpath, name), "rb") as f:
                total += len(f.read())
    return total


def report(name: str, seconds: float, baseline_name: str, baseline: float, extra: str) -> None:
    print(f"{name}: {seconds:.3f} s = {seconds / baseline:.1f}x {baseline_name} ({baseline:.3f} s); {extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        urls = Path(tmp) / "urls.txt"
        make_list(urls, args.lines)
        base, _ = best_of(args.repeat, lambda: urls.read_text(encoding="utf-8").splitlines())
        took, plan = best_of(args.repeat, lambda: decompose("fetch", urls, agents=1000))
        parts = len(plan.partitions)
        report(f"list {args.lines:,} lines -> 1,000 agents", took, "read+split", base, f"{parts} partitions")
        took, plan = best_of(args.repeat, lambda: decompose("fetch", urls, agents=100, budget_tokens=20_000))
        leaves, depth = len(plan.partitions), plan.root.depth()
        report(
            f"list {args.lines:,} lines -> 100 agents, 20k-token sessions",
            took,
            "read+split",
            base,
            f"{leaves} leaves, tree depth {depth}",
        )

        tree = Path(tmp) / "tree"
        tree.mkdir()
        make_tree(tree, args.files)
        read_tree(tree)  # warm the page cache for both sides alike
        base, _ = best_of(args.repeat, lambda: read_tree(tree))
        took, plan = best_of(args.repeat, lambda: decompose("review", tree, agents=100))
        kept = plan.total_items
        report(
            f"directory {args.files:,} files -> 100 agents",
            took,
            "walk+read",
            base,
            f"{kept} files kept, {len(plan.partitions)} partitions",
        )


if __name__ == "__main__":
    main()
