"""Outputs: results.jsonl order and fields, summary.json, report.md, a self-contained report.html;
categories and the claimed dedup bands."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from agent_fleet.aggregate import (
    AggregateStats,
    LexicalEmbedder,
    TaskType,
    assign_categories,
    band_check,
    classify_task,
    write_outputs,
)
from agent_fleet.aggregate.outputs import sort_results, urgency
from agent_fleet.domain.results import ResultItem


def item(id_: str, cat: str | None, conf: float | None, loc: str | None = None, **extra: object) -> ResultItem:
    dups = tuple(extra.pop("dups", ()))  # type: ignore[call-overload]
    return ResultItem(
        id=id_,
        partition_id="p1",
        session_id="s1",
        title=f"Title {id_}",
        body=f"Body of {id_}.",
        category=cat,
        confidence=conf,
        location=loc,
        duplicates=dups,
        extra=dict(extra),
    )


def test_urgency_reads_severity_and_priority() -> None:
    assert urgency(item("a", None, None, severity="Critical")) == 0
    assert urgency(item("a", None, None, priority="P3")) == 3
    assert urgency(item("a", None, None, priority=1)) == 1
    assert urgency(item("a", None, None, severity="info")) == 4
    assert urgency(item("a", None, None)) == 2
    assert urgency(item("a", None, None, severity="whatever")) == 2


def test_sort_by_category_then_severity_then_confidence_then_location() -> None:
    rs = [
        item("other1", "other", 0.99),
        item("sec-low-conf", "security", 0.3, "b.py"),
        item("sec-crit", "security", 0.2, "z.py", severity="critical"),
        item("sec-hi-conf-b", "security", 0.9, "b.py"),
        item("sec-hi-conf-a", "security", 0.9, "a.py"),
        item("bug-none", "bug", None),
        item("bug", "bug", 0.1),
        item("uncat", None, 0.5),
    ]
    order = [r.id for r in sort_results(rs)]
    assert order == [
        "bug",
        "bug-none",
        "sec-crit",
        "sec-hi-conf-a",
        "sec-hi-conf-b",
        "sec-low-conf",
        "other1",
        "uncat",
    ]


SUMMARY = {
    "run_id": "run-1",
    "status": "completed",
    "task": "Find bugs",
    "partitions": 3,
    "sessions": {"completed": 3, "failed": 0, "paused": 0},
    "results_raw": 6,
    "results_unique": 3,
    "dedup_rate": 0.5,
    "tokens": {"input": 1000, "output": 200, "total": 1200},
    "cost_usd": 0.0123,
    "llm_calls": 9,
    "errors": {"rate_limited": 1, "server": 0, "timeout": 0},
    "duration_s": 12.5,
    "out_dir": "/tmp/x",
    "verification": {
        "sampled": 3,
        "confirmed": 2,
        "refuted": 1,
        "unsure": 0,
        "agreement": 0.6667,
        "agreement_ci": [0.2077, 0.9385],
        "threshold": 0.8,
        "alarm": True,
    },
}


def test_write_outputs_writes_the_four_files(tmp_path: Path) -> None:
    verified = {"status": "confirm", "reason": "ok", "verifier": "m"}
    rs = [
        item("a", "security", 0.9, "app/x.py", dups=["d1", "d2"], severity="high", verification=verified),
        item("b", "performance", 0.5, "app/y.py", dups=["d3"]),
        item("c", None, None),
    ]
    timeline = [
        {"session_id": f"s{i}", "start": 100.0 + i, "end": 105.0 + 2 * i, "state": "completed"} for i in range(5)
    ]
    per_model = {"gpt-4.1-mini": {"calls": 9, "tokens": 1200, "cost_usd": "0.0123"}}
    write_outputs(tmp_path, SUMMARY, rs, timeline=timeline, per_model=per_model)

    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [x["id"] for x in lines] == ["b", "a", "c"]  # performance, security, uncategorized
    spec_fields = {
        "id",
        "partition_id",
        "session_id",
        "title",
        "body",
        "category",
        "confidence",
        "location",
        "duplicates",
    }
    assert all(spec_fields <= set(x) for x in lines)
    assert lines[1]["duplicates"] == ["d1", "d2"]
    assert lines[1]["verification"]["status"] == "confirm"
    assert lines[1]["severity"] == "high"

    summary_text = (tmp_path / "summary.json").read_text()
    assert json.loads(summary_text) == SUMMARY
    assert summary_text.startswith("{\n  ")

    md = (tmp_path / "report.md").read_text()
    assert md.startswith("# Fleet run report: Find bugs")
    assert "| Dedup rate | 50.0% |" in md
    assert "## security (1)" in md and "## performance (1)" in md
    assert "2 duplicates" in md and "1 duplicate" in md and "verification: confirm" in md
    assert "severity high" in md
    assert "ALARM" in md
    assert "| security | 3 | 1 | 66.7% |" in md
    assert "| gpt-4.1-mini | 9 | 1,200 | $0.0123 |" in md

    html = (tmp_path / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert html.count("<svg") == 3
    assert "<script" not in html.lower()
    # self-contained: no external resource is referenced (the SVG namespace is an identifier, not a fetch)
    refs = re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', html) + re.findall(r"url\(([^)]*)\)", html)
    assert refs == []
    assert 'class="alarm"' in html
    assert "Title a" in html and "app/x.py" in html


def test_html_escapes_agent_text_and_handles_many_sessions(tmp_path: Path) -> None:
    rs = [ResultItem(id="x", partition_id="p", session_id="s", title="<script>alert(1)</script>", body="a & b")]
    timeline = [{"session_id": f"s{i}", "start": 0.0, "end": 10.0, "state": "completed"} for i in range(300)]
    timeline += [{"session_id": f"t{i}", "start": 20.0, "end": 30.0, "state": "failed"} for i in range(200)]
    write_outputs(tmp_path, {"task": "t"}, rs, timeline=timeline)
    html = (tmp_path / "report.html").read_text()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "active sessions (peak 300)" in html


class FixedNamer:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def name(self, members: Sequence[ResultItem]) -> str:
        self.calls.append([m.id for m in members])
        return "  Password Storage "


def _related() -> list[ResultItem]:
    def mk(id_: str, title: str, body: str, cat: str | None = None) -> ResultItem:
        return ResultItem(
            id=id_, partition_id="p", session_id="s", title=title, body=body, category=cat, confidence=0.5
        )

    return [
        mk("md5", "Passwords hashed with MD5", "User passwords are hashed with MD5 before they are stored."),
        mk("sha1", "Passwords hashed with SHA-1", "User passwords are hashed with SHA-1 before they are stored."),
        mk("readme", "Typo in README", "The README misspells the project name in its first line."),
        mk("agent", "Anything", "Whatever the agent said.", cat=" Security "),
    ]


async def test_categories_from_agent_cluster_or_model() -> None:
    emb = LexicalEmbedder()
    rs = _related()
    out = await assign_categories(rs, lambda r: emb.vector(r.title + "\n" + r.body), kind="sparse", threshold=0.5)
    cats = {r.id: (r.category, r.extra["category_source"]) for r in out}
    assert cats["agent"] == ("security", "agent")
    assert cats["readme"] == ("other", "cluster")
    assert cats["md5"] == cats["sha1"]
    assert cats["md5"][0] in ("passwords hashed with md5", "passwords hashed with sha-1")
    namer = FixedNamer()
    out = await assign_categories(
        rs, lambda r: emb.vector(r.title + "\n" + r.body), kind="sparse", threshold=0.5, namer=namer
    )
    assert {r.id: r.category for r in out}["md5"] == "password storage"
    assert len(namer.calls) == 1 and sorted(namer.calls[0]) == ["md5", "sha1"]


def test_classify_task() -> None:
    assert classify_task("Review this codebase for security bugs", "directory") == TaskType.CODE_ANALYSIS
    assert classify_task("Translate each line into German", "list") == TaskType.TRANSLATION
    assert classify_task("Write unit tests for every public function", "directory") == TaskType.TEST_GENERATION
    assert classify_task("Document each module", "directory") == TaskType.DOCUMENTATION
    assert classify_task("Summarise each page", "list") == TaskType.WEB_RESEARCH
    assert classify_task("Do the thing", "directory") == TaskType.CODE_ANALYSIS
    assert classify_task("Do the thing", None) == TaskType.OTHER


def _stats(raw: int, unique: int) -> AggregateStats:
    return AggregateStats(
        raw=raw,
        unique=unique,
        exact_duplicates=(raw - unique) // 2,
        near_duplicates=raw - unique - (raw - unique) // 2,
        dedup_rate=1 - unique / raw,
        embedded=unique,
        cache_hits=0,
        final=True,
        threshold=0.95,
        embedder="all-minilm-l6-v2-w254",
    )


@pytest.mark.parametrize(
    ("raw", "unique", "inside", "word"),
    [(100, 45, True, "inside"), (100, 80, False, "below"), (100, 30, False, "above")],
)
def test_band_check(raw: int, unique: int, inside: bool, word: str) -> None:
    check = band_check(TaskType.CODE_ANALYSIS, _stats(raw, unique))
    assert check.inside is inside
    assert f" is {word} the 50%–60% claimed for code analysis" in check.note
    assert f"{raw} raw results, {unique} unique" in check.note
    assert check.to_dict()["claimed_band"] == [0.5, 0.6]


def test_band_check_without_a_claim_and_small_runs() -> None:
    assert band_check("other", _stats(10, 9)).inside is None
    assert "too few results" in band_check("web_research", _stats(10, 5)).note
