"""Every finding survives dedup: a group keeps each member's place, session and confidence; the reports
list every other place; per-item results are never merged across items; the scope is a setting."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from agent_fleet.aggregate import AggregateConfig, Aggregator, DedupScope, LexicalEmbedder, write_outputs
from agent_fleet.aggregate.scope import default_scope, resolve_scope
from agent_fleet.config import parse_config
from agent_fleet.domain.results import ResultItem
from agent_fleet.errors import ConfigError

MUTABLE = (
    "Mutable default argument",
    "The function uses a list as a default argument; it is created once and shared by every call.",
)


def finding(i: int, where: str, conf: float, text: tuple[str, str] = MUTABLE, session: str = "") -> ResultItem:
    return ResultItem(
        id=f"r{i:05d}",
        partition_id=f"p{i % 3}",
        session_id=session or f"run-1.s{i:05d}",
        title=text[0],
        body=text[1] + ("" if i % 2 else " "),  # the same finding, worded identically or with a trailing space
        confidence=conf,
        location=where,
    )


async def _finalize(items: list[ResultItem], scope: DedupScope) -> list[ResultItem]:
    agg = Aggregator(LexicalEmbedder(), config=AggregateConfig(categorize=False, scope=scope, scope_reason="test"))
    await agg.add_many(items)
    reps = await agg.finalize()
    assert agg.stats().scope == str(scope)
    return reps


async def test_a_group_keeps_every_member_and_the_reports_list_every_place(tmp_path: Path) -> None:
    files = ["a/orders.py:6", "a/pagination.py:20", "b/retry.py:17", "c/stock.py:36", "d/products.py:42"]
    items = [finding(i, f, 0.6 + 0.05 * i) for i, f in enumerate(files)]
    items.append(finding(9, "e/other.py:3", 0.9, ("SQL injection", "The login query concatenates user input.")))
    reps = await _finalize(items, DedupScope.GLOBAL)
    assert len(reps) == 2
    rep = next(r for r in reps if r.title == MUTABLE[0])
    assert rep.location == files[-1]  # the most confident member stands for the group
    occ = rep.extra["occurrences"]
    assert {o["location"] for o in occ} == set(files[:-1])
    by_loc = {o["location"]: o for o in occ}
    assert by_loc["a/orders.py:6"]["session_id"] == "run-1.s00000"
    assert by_loc["a/orders.py:6"]["confidence"] == pytest.approx(0.6)
    assert all(o["partition_id"].startswith("p") for o in occ)
    write_outputs(tmp_path, {"run_id": "run-1", "task": "Find bugs"}, reps)
    md = (tmp_path / "report.md").read_text()
    html = (tmp_path / "report.html").read_text()
    line = next(x for x in md.splitlines() if "Also found in" in x)
    assert "4 other places" in line
    for f in files[:-1]:
        assert f"`{f}`" in line
        assert f in html
    assert "s00000, confidence 0.60" in line
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    jrep = next(x for x in lines if x["title"] == MUTABLE[0])
    assert {o["location"] for o in jrep["occurrences"]} == set(files[:-1])


def _summaries(n: int, identical_pairs: int) -> list[ResultItem]:
    """Per-page summaries from a template: similar enough that a global scope folds many of them."""
    rng = random.Random(3)
    topics = ["the pricing page", "a changelog", "the API reference", "a blog post", "the status page"]
    out = []
    for i in range(n):
        body = f"This page is {rng.choice(topics)} of the product, page {i}. It describes features, limits and pricing."
        out.append(
            ResultItem(
                id=f"r{i:05d}",
                partition_id=f"p{i // 20}",
                session_id=f"run-1.s{i // 20:05d}",
                title="Summary",
                body=body,
                location=f"https://example.org/page/{i}",
            )
        )
    for k in range(identical_pairs):  # two pages with byte-identical content: identical summaries
        a, b = out[2 * k], out[2 * k + 1]
        out[2 * k + 1] = ResultItem(b.id, b.partition_id, b.session_id, a.title, a.body, location=b.location)
    return out


async def test_two_thousand_per_page_summaries_stay_two_thousand() -> None:
    items = _summaries(2000, identical_pairs=0)
    assert len(await _finalize(items, DedupScope.GLOBAL)) < 50  # what a global scope does to them
    reps = await _finalize(items, DedupScope.ITEM)
    assert len(reps) == 2000
    assert {r.location for r in reps} == {i.location for i in items}


async def test_byte_identical_results_about_different_items_still_merge_and_keep_both_places() -> None:
    items = _summaries(200, identical_pairs=5)
    reps = await _finalize(items, DedupScope.ITEM)
    assert len(reps) == 195
    merged = [r for r in reps if r.duplicates]
    assert len(merged) == 5
    assert all(r.extra["occurrences"][0]["exact"] for r in merged)
    assert len({r.location for r in merged} | {r.extra["occurrences"][0]["location"] for r in merged}) == 10


async def test_item_scope_still_merges_within_one_item_and_none_merges_nothing_but_identical() -> None:
    same_page = [
        ResultItem("r1", "p1", "s1", "Summary", "The page lists the plans and their prices.", location="https://x/1"),
        ResultItem("r2", "p1", "s2", "Summary", "The page lists the plans and their prices!", location="https://x/1"),
    ]
    assert len(await _finalize(same_page, DedupScope.ITEM)) == 1  # the same item, the same text after normalising
    assert len(await _finalize(same_page, DedupScope.NONE)) == 2  # not byte-identical


def test_default_scope_per_task_type_and_the_setting() -> None:
    assert default_scope("Summarise each page")[0] == DedupScope.ITEM
    assert default_scope("Summarise these pages: https://a https://b")[0] == DedupScope.ITEM
    assert default_scope("Translate the manual into German")[0] == DedupScope.ITEM
    assert default_scope("Write one test per module")[0] == DedupScope.ITEM
    scope, why = default_scope("Find bugs and risky code", "directory")
    assert scope == DedupScope.GLOBAL and "code analysis" in why
    assert resolve_scope("global", "Summarise each page") == (DedupScope.GLOBAL, "aggregate.dedup_scope in fleet.yaml")
    assert resolve_scope("auto", "Summarise each page")[0] == DedupScope.ITEM
    assert parse_config({"aggregate": {"dedup_scope": "item"}}).aggregate.dedup_scope == "item"
    assert parse_config({}).aggregate.dedup_scope == "auto"
    with pytest.raises(ConfigError, match="dedup_scope"):
        parse_config({"aggregate": {"dedup_scope": "everything"}})
