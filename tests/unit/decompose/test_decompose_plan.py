"""The plan: N = min(agents, items), hierarchical splitting to the content limit, ids, determinism, round trip,
the invariant check, and argument errors."""

from __future__ import annotations

import json
import os
import random
from dataclasses import replace
from pathlib import Path

import pytest

from agent_fleet.decompose import DecomposeOptions, InputSource, decompose, estimate_tokens, plan_source, read_items
from agent_fleet.domain.plan import InputKind, Plan, PlanNode
from agent_fleet.errors import InputError, PlanInvariantError, UsageError


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def leaf_nodes(node: PlanNode) -> list[PlanNode]:
    if node.leaf is not None:
        return [node]
    return [leaf for child in node.children for leaf in leaf_nodes(child)]


def test_n_is_min_of_agents_and_items(tmp_path: Path) -> None:
    f = write_lines(tmp_path / "x.txt", [f"item {i}" for i in range(7)])
    assert len(decompose("t", f, agents=3).partitions) == 3
    assert len(decompose("t", f, agents=7).partitions) == 7
    plan = decompose("t", f, agents=50)
    assert len(plan.partitions) == 7
    assert all(len(p.items) == 1 for p in plan.partitions)
    assert plan.root.depth() == 2  # nothing needed splitting: root → leaves


@pytest.mark.parametrize("seed", range(8))
def test_hierarchical_split_makes_every_leaf_fit(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    lines = ["y" * rng.randint(10, 400) + str(i) for i in range(rng.randint(300, 1500))]
    f = write_lines(tmp_path / "x.txt", lines)
    agents = rng.randint(1, 5)
    budget = rng.choice([2_000, 4_000, 8_000])
    opts = DecomposeOptions(content_fraction=0.25)
    plan = decompose("t", f, agents=agents, budget_tokens=budget, options=opts)
    limit = budget // 4
    assert all(p.est_tokens <= limit for p in plan.partitions)
    assert len(plan.partitions) > agents
    assert plan.root.depth() > 2
    # Each group of the first cut is either a leaf or an inner node whose leaves cover it exactly.
    assert len(plan.root.children) == min(agents, len(lines))
    for node in plan.root.children:
        assert node.est_tokens == sum(leaf.est_tokens for leaf in leaf_nodes(node))
        assert node.items == sum(leaf.items for leaf in leaf_nodes(node))
    assert [leaf.leaf for leaf in leaf_nodes(plan.root)] == [p.id for p in plan.partitions]
    assert [p.id for p in plan.partitions] == [f"p{i:04d}" for i in range(len(plan.partitions))]
    assert [p.index for p in plan.partitions] == list(range(len(plan.partitions)))
    assert [item for p in plan.partitions for item in p.items] == lines
    assert any("were split" in n for n in plan.notes)


def test_halving_splits_a_group_near_its_middle(tmp_path: Path) -> None:
    f = write_lines(tmp_path / "x.txt", ["abcd"] * 16)  # 16 items of 1 token
    plan = decompose("t", f, agents=1, budget_tokens=16, options=DecomposeOptions(content_fraction=0.25))
    assert [len(p.items) for p in plan.partitions] == [4, 4, 4, 4]
    assert plan.root.depth() == 4  # root → group → halves → quarters
    group = plan.root.children[0]
    assert group.id == "g0000" and [c.id for c in group.children] == ["g0000.0", "g0000.1"]


def test_a_single_item_over_the_limit_is_its_own_leaf_and_noted(tmp_path: Path) -> None:
    f = write_lines(tmp_path / "x.txt", ["a" * 8, "b" * 4000, "c" * 8, "d" * 8])
    plan = decompose("t", f, agents=1, budget_tokens=400)  # content limit 100 tokens
    sizes = [(p.label, p.est_tokens) for p in plan.partitions]
    assert ("line 2", 1000) in sizes
    assert all(t <= 100 for label, t in sizes if label != "line 2")
    assert any(n.startswith("p") and "(line 2) is one item of ~1000 tokens" in n for n in plan.notes)


def test_directory_split_by_budget(tmp_path: Path) -> None:
    for i in range(40):
        (tmp_path / f"m{i % 4}").mkdir(exist_ok=True)
        (tmp_path / f"m{i % 4}" / f"f{i}.py").write_text("q" * 2000)
    plan = decompose("t", tmp_path, agents=2, budget_tokens=8_000)
    assert all(p.est_tokens <= 2_000 for p in plan.partitions)
    assert len(plan.partitions) > 2 and plan.root.depth() > 2
    assert sorted(i for p in plan.partitions for i in p.item_ids) == list(range(40))


def test_same_input_same_plan(tmp_path: Path) -> None:
    rng = random.Random(7)
    for i in range(60):
        d = tmp_path / f"pkg{rng.randint(0, 5)}"
        d.mkdir(exist_ok=True)
        (d / f"f{i}.py").write_text("v" * rng.randint(1, 5000))
    a = decompose("t", tmp_path, agents=7, budget_tokens=6_000)
    b = decompose("t", tmp_path, agents=7, budget_tokens=6_000)
    assert a.to_dict() == b.to_dict()
    f = write_lines(tmp_path.parent / "l.txt", [str(rng.random()) for _ in range(500)])
    assert decompose("t", f, agents=9).to_dict() == decompose("t", f, agents=9).to_dict()


@pytest.mark.parametrize("suffix", [".txt", ".jsonl", ".csv", "dir", None])
def test_plan_round_trips_through_dicts_and_json(tmp_path: Path, suffix: str | None) -> None:
    path: Path | None
    if suffix == "dir":
        path = tmp_path / "code"
        (path / "a").mkdir(parents=True)
        (path / "a" / "x.py").write_text("x" * 900)
        (path / "b.py").write_text("y" * 50)
    elif suffix == ".csv":
        path = write_lines(tmp_path / "t.csv", ["a,b", "1,2", '"3,4",5'])
    elif suffix == ".jsonl":
        path = write_lines(tmp_path / "t.jsonl", ['{"a": 1}', "[2]", '"three"'])
    elif suffix == ".txt":
        path = write_lines(tmp_path / "t.txt", ["https://x.example", "https://y.example"])
    else:
        path = None
    plan = decompose("find the bugs", path, agents=2, budget_tokens=800)
    again = Plan.from_dict(json.loads(json.dumps(plan.to_dict())))
    assert again == plan
    again.check()


def test_task_only_plan(tmp_path: Path) -> None:
    plan = decompose("write a poem", None, agents=5)
    assert plan.kind is InputKind.NONE and plan.total_items == 0
    assert len(plan.partitions) == 1
    (part,) = plan.partitions
    assert part.id == "p0000" and part.items == () and part.kind is InputKind.NONE
    assert plan.input_path is None


def test_plan_records_the_input_and_budget(tmp_path: Path) -> None:
    f = write_lines(tmp_path / "x.txt", ["a"])
    plan = decompose("t", f, agents=1, budget_tokens=5000)
    assert plan.input_path == str(f.resolve()) and plan.budget_tokens == 5000 and plan.task == "t"


def test_estimate_tokens() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("abcde", chars_per_token=2.5) == 2


def test_bad_arguments_are_input_errors(tmp_path: Path) -> None:
    f = write_lines(tmp_path / "x.txt", ["a"])
    with pytest.raises(InputError, match="agents must be at least 1, got 0"):
        decompose("t", f, agents=0)
    with pytest.raises(InputError, match="budget_tokens must be at least 1"):
        decompose("t", f, agents=1, budget_tokens=0)
    with pytest.raises(InputError, match="task is empty"):
        decompose("  ", f, agents=1)
    with pytest.raises(InputError, match=r"input not found: .*nope\.txt"):
        decompose("t", tmp_path / "nope.txt", agents=1)
    with pytest.raises(UsageError, match="content_fraction"):
        DecomposeOptions(content_fraction=0)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="permissions do not bind root")
def test_unreadable_file_is_an_input_error(tmp_path: Path) -> None:
    f = write_lines(tmp_path / "x.txt", ["a"])
    f.chmod(0)
    try:
        with pytest.raises(InputError, match=r"cannot read .*x\.txt: Permission denied"):
            decompose("t", f, agents=1)
    finally:
        f.chmod(0o644)


@pytest.mark.skipif(not Path("/proc/self/mem").is_file(), reason="needs Linux /proc")
def test_a_file_that_fails_to_read_is_an_input_error() -> None:
    # A regular file whose read fails even for root (EIO).
    with pytest.raises(InputError, match="cannot read /proc/self/mem: "):
        decompose("t", "/proc/self/mem", agents=1)


def test_special_file_is_an_input_error(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="neither a regular file nor a directory"):
        read_items(fifo)


def check_fails(plan: Plan, message: str) -> None:
    with pytest.raises(PlanInvariantError, match=message):
        plan.check()


def test_plan_check_catches_duplicated_missing_and_foreign_items(tmp_path: Path) -> None:
    f = write_lines(tmp_path / "x.txt", [f"i{i}" for i in range(6)])
    plan = decompose("t", f, agents=3)
    plan.check()
    p0, p1, p2 = plan.partitions
    dup = replace(p1, items=(*p1.items, "i0"), item_ids=(*p1.item_ids, 0))
    check_fails(replace(plan, partitions=(p0, dup, p2)), r"more than one partition: \[0\]")
    short = replace(p2, items=p2.items[:-1], item_ids=p2.item_ids[:-1])
    check_fails(replace(plan, partitions=(p0, p1, short)), r"no partition: \[5\]")
    foreign = replace(p2, items=(*p2.items, "zz"), item_ids=(*p2.item_ids, 6))
    check_fails(replace(plan, partitions=(p0, p1, foreign)), r"outside the input")
    check_fails(replace(plan, partitions=(p0, p2, p1)), "has index")
    check_fails(replace(plan, root=PlanNode(id="root", est_tokens=0, items=0)), "tree leaves differ")


def test_plan_source_partitions_items_built_in_memory() -> None:
    source = InputSource(kind=InputKind.JSONL, path=None, items=["1", "2", "3", "4", "5"], tokens=[1, 1, 1, 1, 1])
    plan = plan_source("t", source, agents=2, budget_tokens=1000, options=DecomposeOptions())
    plan.check()
    assert [p.label for p in plan.partitions] == ["items 1–2", "items 3–5"]
    assert [p.tools for p in plan.partitions] == [(), ()]
