"""Directory inputs: git's ignore semantics, skipped files noted, deterministic walk, module-aware cuts."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from agent_fleet.decompose import DIRECTORY_TOOLS, DecomposeOptions, decompose, read_items
from agent_fleet.domain.plan import InputKind, Plan


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


def test_gitignore_root_nested_negation_and_directory_patterns(tmp_path: Path) -> None:
    write(tmp_path, ".gitignore", "*.log\nbuild/\n*.txt\n!keep.txt\n/anchored.py\n")
    write(tmp_path, "app.py")
    write(tmp_path, "debug.log")
    write(tmp_path, "notes.txt")
    write(tmp_path, "keep.txt", "kept\n")
    write(tmp_path, "anchored.py")
    write(tmp_path, "build/out.py")  # inside an ignored directory
    write(tmp_path, "lib/build", "a file named build is not a directory\n")
    write(tmp_path, "lib/anchored.py")  # /anchored.py is anchored to the root
    write(tmp_path, "lib/build2/x.py")
    write(tmp_path, "lib/sub/.gitignore", "generated/\n!*.log\n/only_here.py\n")
    write(tmp_path, "lib/sub/trace.log")  # re-included by the deeper file
    write(tmp_path, "lib/sub/only_here.py")
    write(tmp_path, "lib/sub/deeper/only_here.py")  # the anchor is relative to lib/sub
    write(tmp_path, "lib/sub/generated/g.py")
    write(tmp_path, "lib/sub/keep.txt", "kept too\n")
    write(tmp_path, ".git/HEAD", "ref: refs/heads/main\n")
    write(tmp_path, ".git/info/exclude", "secret.cfg\n")
    write(tmp_path, "secret.cfg")
    plan = decompose("review", tmp_path, agents=3)
    assert sorted(files_of(plan)) == sorted(
        [
            ".gitignore",
            "app.py",
            "keep.txt",
            "lib/anchored.py",
            "lib/build",
            "lib/build2/x.py",
            "lib/sub/.gitignore",
            "lib/sub/deeper/only_here.py",
            "lib/sub/keep.txt",
            "lib/sub/trace.log",
        ]
    )
    assert any("excluded by .gitignore" in n for n in plan.notes)


def test_a_file_in_an_excluded_directory_cannot_be_re_included(tmp_path: Path) -> None:
    write(tmp_path, ".gitignore", "vendor/\n!vendor/keep.py\nout/*\n!out/keep.py\n")
    write(tmp_path, "vendor/keep.py")
    write(tmp_path, "out/keep.py")  # out/ itself is not excluded, only its contents, so this comes back
    write(tmp_path, "out/drop.py")
    write(tmp_path, "main.py")
    assert sorted(files_of(decompose("t", tmp_path, agents=1))) == [".gitignore", "main.py", "out/keep.py"]


def test_gitignore_can_be_turned_off(tmp_path: Path) -> None:
    write(tmp_path, ".gitignore", "*.py\n")
    write(tmp_path, "a.py")
    plan = decompose("t", tmp_path, agents=1, options=DecomposeOptions(use_gitignore=False))
    assert files_of(plan) == [".gitignore", "a.py"]


def test_binary_huge_empty_and_undecodable_files_are_skipped_and_noted(tmp_path: Path) -> None:
    write(tmp_path, "ok.py", "print('hi')\n")
    write(tmp_path, "img.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    write(tmp_path, "latin1.txt", "caf\xe9\n".encode("latin-1"))
    write(tmp_path, "big.sql", "-- x\n" * 1000)
    write(tmp_path, "empty.py", "")
    plan = decompose("t", tmp_path, agents=2, options=DecomposeOptions(max_file_bytes=1000))
    assert files_of(plan) == ["ok.py"]
    notes = "\n".join(plan.notes)
    assert "skipped 4 file(s): 2 binary, 1 empty, 1 too large" in notes
    assert "skipped img.png: binary" in notes
    assert "skipped latin1.txt: binary (not UTF-8)" in notes
    assert "skipped big.sql: too large (5000 bytes > 1000)" in notes
    assert "skipped empty.py: empty" in notes


def test_symbolic_links_are_never_followed(tmp_path: Path) -> None:
    outside = write(tmp_path, "outside/secret.txt", "do not read\n")
    root = tmp_path / "repo"
    write(root, "main.py")
    (root / "link.txt").symlink_to(outside)
    (root / "linkdir").symlink_to(outside.parent, target_is_directory=True)
    plan = decompose("t", root, agents=2)
    assert files_of(plan) == ["main.py"]
    assert "skipped link.txt: symbolic link" in plan.notes
    assert "skipped linkdir: symbolic link" in plan.notes


def test_the_list_of_skipped_files_is_truncated(tmp_path: Path) -> None:
    write(tmp_path, "main.py")
    for i in range(30):
        write(tmp_path, f"bin/{i:02d}.dat", b"\x00\x01")
    plan = decompose("t", tmp_path, agents=1, options=DecomposeOptions(max_listed_skips=5))
    named = [n for n in plan.notes if n.startswith("skipped bin/")]
    assert named == [f"skipped bin/{i:02d}.dat: binary" for i in range(5)]
    assert "… and 25 more skipped file(s) not listed" in plan.notes


def test_walk_order_is_files_first_then_subdirectories_sorted(tmp_path: Path) -> None:
    for rel in ["z.py", "a/y.py", "a/b/x.py", "a/a.py", "B.py", "c/d/e.py", "a.py"]:
        write(tmp_path, rel)
    assert list(read_items(tmp_path).items) == ["B.py", "a.py", "z.py", "a/a.py", "a/y.py", "a/b/x.py", "c/d/e.py"]


def test_directory_tokens_count_content_and_the_path_line(tmp_path: Path) -> None:
    write(tmp_path, "abc.py", "x" * 40)  # 10 tokens of content, "- abc.py" is 9 chars: 3 tokens
    assert list(read_items(tmp_path).tokens) == [13]


def test_cuts_keep_modules_together(tmp_path: Path) -> None:
    # Four modules of equal size, eight files each: four agents should get one module each.
    for module in ["alpha", "beta", "gamma", "delta"]:
        for i in range(8):
            write(tmp_path, f"pkg/{module}/f{i}.py", "y" * (400 + 37 * i))
    plan = decompose("t", tmp_path, agents=4)
    assert [p.label for p in plan.partitions] == ["pkg/alpha", "pkg/beta", "pkg/delta", "pkg/gamma"]
    assert all(p.tools == DIRECTORY_TOOLS for p in plan.partitions)
    assert plan.kind is InputKind.DIRECTORY


def test_cut_moves_to_a_module_boundary_when_balance_allows(tmp_path: Path) -> None:
    # Modules of 10 and 8 equal files: the exact halving point is inside "a" (9 | 9); cutting at the module
    # boundary (10 | 8) makes the larger part 11% heavier, within the default 15% slack.
    for i in range(10):
        write(tmp_path, f"a/f{i}.py", "z" * 396)
    for i in range(8):
        write(tmp_path, f"b/f{i}.py", "z" * 396)
    plan = decompose("t", tmp_path, agents=2)
    assert [p.label for p in plan.partitions] == ["a", "b"]
    assert [len(p.items) for p in plan.partitions] == [10, 8]
    strict = decompose("t", tmp_path, agents=2, options=DecomposeOptions(boundary_slack=0.0))
    assert [len(p.items) for p in strict.partitions] == [9, 9]
    tight = decompose("t", tmp_path, agents=2, options=DecomposeOptions(boundary_slack=0.05))
    assert [len(p.items) for p in tight.partitions] == [9, 9]


@pytest.mark.parametrize("seed", range(6))
def test_random_trees_every_file_in_exactly_one_leaf_and_balanced(tmp_path: Path, seed: int) -> None:
    rng = random.Random(500 + seed)
    expected: list[str] = []
    for i in range(rng.randint(1, 120)):
        depth = rng.randint(0, 3)
        rel = "/".join(f"d{rng.randint(0, 3)}" for _ in range(depth)) + ("/" if depth else "") + f"f{i}.py"
        write(tmp_path, rel, "w" * rng.randint(1, 3000))
        expected.append(rel)
    agents = rng.randint(1, 16)
    opts = DecomposeOptions(boundary_slack=0.15)
    plan = decompose("t", tmp_path, agents=agents, options=opts)
    assert sorted(files_of(plan)) == sorted(expected)
    assert sorted(i for p in plan.partitions for i in p.item_ids) == list(range(len(expected)))
    assert len(plan.partitions) == min(agents, len(expected))
    tokens = list(read_items(tmp_path).tokens)
    ideal = sum(tokens) / len(plan.partitions)
    # Stated bound: (1 + slack) x (ideal + the largest file).
    assert max(p.est_tokens for p in plan.partitions) <= 1.15 * (ideal + max(tokens))


def test_directory_input_with_nothing_readable_is_an_input_error(tmp_path: Path) -> None:
    from agent_fleet.errors import InputError

    write(tmp_path, ".gitignore", "*\n")
    write(tmp_path, "a.py")
    with pytest.raises(InputError, match="no text files to work on"):
        decompose("t", tmp_path, agents=1)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="no text files to work on"):
        decompose("t", empty, agents=1)
