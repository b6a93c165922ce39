"""Identity, not keywords: what a result is about comes from its location, its text and the plan's input
items; results about different items never merge, results about one item (or none) do, every member
kept with its place and words; the scope and threshold are settings, never read from the task."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from agent_fleet.aggregate import AggregateConfig, Aggregator, DedupScope, ItemIndex, LexicalEmbedder, write_outputs
from agent_fleet.aggregate.bands import TaskType, band_check
from agent_fleet.aggregate.merge_scope import dedup_rule, resolve_scope
from agent_fleet.config import parse_config
from agent_fleet.domain.plan import InputKind, Partition, Plan, PlanNode
from agent_fleet.domain.results import ResultItem
from agent_fleet.errors import ConfigError, UsageError
from agent_fleet.options import RunOptions

MUTABLE = (
    "Mutable default argument",
    "The function uses a list as a default argument; it is created once and shared by every call.",
)


def plan_of(kind: InputKind, parts: list[list[str]]) -> Plan:
    partitions, n = [], 0
    for i, items in enumerate(parts):
        ids = tuple(range(n, n + len(items)))
        n += len(items)
        partitions.append(Partition(f"p{i}", i, kind, tuple(items), ids, 100))
    root = PlanNode("root", 100, n, tuple(PlanNode(p.id, 100, len(p.items), leaf=p.id) for p in partitions))
    return Plan("t", kind, "in", n, tuple(partitions), root, 1000)


def finding(i: int, where: str | None, conf: float, text: tuple[str, str] = MUTABLE, part: str = "") -> ResultItem:
    return ResultItem(
        id=f"r{i:05d}",
        partition_id=part or f"p{i % 3}",
        session_id=f"run-1.s{i:05d}",
        title=text[0],
        body=text[1] + ("" if i % 2 else " "),  # the same finding, worded identically or with a trailing space
        confidence=conf,
        location=where,
    )


async def _finalize(items: list[ResultItem], scope: DedupScope, plan: Plan | None = None) -> list[ResultItem]:
    config = AggregateConfig(categorize=False, scope=scope, scope_reason="test", items=ItemIndex.from_plan(plan))
    agg = Aggregator(LexicalEmbedder(), config=config)
    await agg.add_many(items)
    reps = await agg.finalize()
    assert agg.stats().scope == str(scope)
    return reps


FILES = ["a/orders.py", "a/pagination.py", "b/retry.py", "c/stock.py", "d/products.py", "e/other.py"]


async def test_a_bug_class_seen_in_five_files_is_one_result_with_every_place_and_word(tmp_path: Path) -> None:
    places = ["a/orders.py:6", "a/pagination.py:20", "b/retry.py:17", "c/stock.py:36", "d/products.py:42"]
    items = [finding(i, f, 0.6 + 0.05 * i) for i, f in enumerate(places)]
    # the same finding in other words, from a sixth session
    items.append(finding(7, "e/other.py:9", 0.5, (MUTABLE[0], MUTABLE[1].replace("every call", "all the calls"))))
    items.append(finding(9, "e/other.py:3", 0.9, ("SQL injection", "The login query concatenates user input.")))
    plan = plan_of(InputKind.DIRECTORY, [FILES[:3], FILES[3:]])
    reps = await _finalize(items, DedupScope.AUTO, plan)  # places inside files: about no particular file
    assert len(reps) == 2
    rep = next(r for r in reps if r.title == MUTABLE[0])
    assert rep.location == places[-1]  # the most confident member stands for the group
    assert rep.extra["corroborated_by"] == 6  # six sessions reported it
    occ = rep.extra["occurrences"]
    assert {o["location"] for o in occ} == {*places[:-1], "e/other.py:9"}
    by_loc = {o["location"]: o for o in occ}
    assert by_loc["a/orders.py:6"]["session_id"] == "run-1.s00000"
    assert by_loc["a/orders.py:6"]["confidence"] == pytest.approx(0.6)
    assert "body" not in by_loc["a/orders.py:6"]  # the same words: no second copy
    assert "all the calls" in by_loc["e/other.py:9"]["body"]  # other words: kept beside the place
    write_outputs(tmp_path, {"run_id": "run-1", "task": "Find bugs"}, reps)
    md = (tmp_path / "report.md").read_text()
    html = (tmp_path / "report.html").read_text()
    line = next(x for x in md.splitlines() if "Also found in" in x)
    assert "5 other places" in line and "reported by 6 sessions" in md
    for f in places[:-1]:
        assert f"`{f}`" in line
        assert f in html
    assert "s00000, confidence 0.60" in line
    assert "all the calls" in md and "all the calls" in html  # the other wording is shown
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    jrep = next(x for x in lines if x["title"] == MUTABLE[0])
    assert {o["location"] for o in jrep["occurrences"]} == {*places[:-1], "e/other.py:9"}
    assert jrep["corroborated_by"] == 6


def _notes(n: int, identical_pairs: int) -> tuple[list[ResultItem], Plan]:
    """Per-page notes from a template: similar enough that a global scope folds many of them."""
    rng = random.Random(3)
    topics = ["the pricing page", "a changelog", "the API reference", "a blog post", "the status page"]
    urls = [f"https://example.org/page/{i}" for i in range(n)]
    out = []
    for i in range(n):
        body = f"This page is {rng.choice(topics)} of the product. It describes features, limits and pricing."
        out.append(ResultItem(f"r{i:05d}", f"p{i // 20}", f"run-1.s{i // 20:05d}", "Note", body, location=urls[i]))
    for k in range(identical_pairs):  # two pages with byte-identical content: identical notes
        a, b = out[2 * k], out[2 * k + 1]
        out[2 * k + 1] = ResultItem(b.id, b.partition_id, b.session_id, a.title, a.body, location=b.location)
    plan = plan_of(InputKind.LIST, [urls[s : s + 20] for s in range(0, n, 20)])
    return out, plan


async def test_notes_about_two_thousand_urls_stay_two_thousand_without_embedding_one() -> None:
    items, plan = _notes(2000, identical_pairs=5)
    assert len(await _finalize(items, DedupScope.GLOBAL, plan)) < 50  # what a global scope does to them
    agg = Aggregator(LexicalEmbedder(), config=AggregateConfig(categorize=False, items=ItemIndex.from_plan(plan)))
    await agg.add_many(items)
    reps = await agg.finalize()
    assert len(reps) == 2000  # byte-identical notes on two pages are still two results
    assert {r.location for r in reps} == {i.location for i in items}
    stats = agg.stats()
    assert stats.embedded == 0  # each note is alone about its page: nothing to compare, nothing embedded
    assert stats.identity == {"location": 2000, "text": 0, "none": 0}
    assert "never merged" in dedup_rule(stats)["rule"] and "2000 of 2000" in dedup_rule(stats)["rule"]
    # the band line says why the rate is low: the notes are about distinct pages
    note = band_check(TaskType.WEB_RESEARCH, stats).note
    assert "below the 40%–50%" in note and "2000 of them are about an input item" in note


async def test_true_repeats_of_one_url_merge_and_results_naming_an_item_in_their_text_are_about_it() -> None:
    url = "https://example.org/a"
    plan = plan_of(InputKind.LIST, [[url, "https://example.org/b"], [url + "/", "https://example.org/c"]])
    note = "The page lists the plans and their prices, with a free tier for small teams."
    items = [
        ResultItem("r1", "p0", "s0", "Pricing", note, confidence=0.7, location=url),
        # the repeated URL in another partition (trailing slash), worded a little differently
        ResultItem("r2", "p1", "s1", "Pricing", note.replace("teams", "teams."), confidence=0.9, location=url + "/"),
        # no location: its text names one item of its partition
        ResultItem("r3", "p0", "s0", "Pricing", f"{note} Seen at https://example.org/b.", confidence=0.8),
        ResultItem("r4", "p1", "s1", "Pricing", f"{note} Seen at https://example.org/c.", confidence=0.8),
    ]
    reps = await _finalize(items, DedupScope.AUTO, plan)
    assert sorted(len(r.duplicates) for r in reps) == [0, 0, 1]
    merged = next(r for r in reps if r.duplicates)
    assert merged.id == "r2" and merged.duplicates == ("r1",)  # the more confident one stands for both
    index = ItemIndex.from_plan(plan)
    assert index.identify(items[2])[1] == "text"
    place = ResultItem("r5", "p0", "s0", "x", "See https://example.org/b#L12 for the table.")
    both = ResultItem("r6", "p0", "s0", "x", "Compare https://example.org/a with https://example.org/b.")
    assert index.identify(place) == (None, "none") and index.identify(both) == (None, "none")


def test_a_record_is_named_by_a_key_column() -> None:
    recs = [json.dumps({"id": i, "kind": "ticket", "text": f"issue {i}"}) for i in range(1, 5)]
    index = ItemIndex.from_plan(plan_of(InputKind.JSONL, [recs[:2], recs[2:]]))
    about = ResultItem("r", "p0", "s", "t", "b", location="3")
    assert index.identify(about) == (json.dumps({"id": 3, "kind": "ticket", "text": "issue 3"}), "location")
    assert index.identify(ResultItem("r", "p0", "s", "t", "b", location="ticket"))[0] is None  # not a key


async def test_item_scope_still_merges_within_one_item_and_none_merges_nothing_but_identical() -> None:
    same_page = [
        ResultItem("r1", "p1", "s1", "Summary", "The page lists the plans and their prices.", location="https://x/1"),
        ResultItem("r2", "p1", "s2", "Summary", "The page lists the plans and their prices!", location="https://x/1"),
    ]
    assert len(await _finalize(same_page, DedupScope.ITEM)) == 1  # the same item, the same text after normalising
    assert len(await _finalize(same_page, DedupScope.NONE)) == 2  # not byte-identical


def test_the_scope_and_threshold_come_from_flags_and_fleet_yaml_only() -> None:
    assert resolve_scope(None, None) == (DedupScope.AUTO, "default")
    assert resolve_scope(None, "auto") == (DedupScope.AUTO, "default")
    assert resolve_scope(None, "global") == (DedupScope.GLOBAL, "aggregate.dedup_scope in fleet.yaml")
    assert resolve_scope("item", "global") == (DedupScope.ITEM, "--dedup-scope")
    assert parse_config({"aggregate": {"dedup_scope": "item"}}).aggregate.dedup_scope == "item"
    assert parse_config({"aggregate": {"dedup_threshold": 0.9}}).aggregate.dedup_threshold == 0.9
    assert parse_config({}).aggregate.dedup_scope == "auto"
    with pytest.raises(ConfigError, match="dedup_scope"):
        parse_config({"aggregate": {"dedup_scope": "everything"}})
    with pytest.raises(ConfigError, match="dedup_threshold"):
        parse_config({"aggregate": {"dedup_threshold": 1.5}})
    assert RunOptions(task="t", dedup_scope="none", dedup_threshold=1.0).dedup_threshold == 1.0
    for bad in (0.0, -0.1, 1.01, math.nan):
        with pytest.raises(UsageError, match=r"--dedup-threshold must be in \(0, 1\]"):
            RunOptions(task="t", dedup_threshold=bad)
    with pytest.raises(UsageError, match="--dedup-scope: unknown scope 'each'"):
        RunOptions(task="t", dedup_scope="each")
