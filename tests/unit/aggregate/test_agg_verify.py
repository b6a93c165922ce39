"""Verification: seeded sampling, Wilson intervals, agreement and alarm, the model-backed verifier."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

import pytest

from agent_fleet.aggregate.verify import (
    ModelVerifier,
    Verdict,
    VerdictKind,
    VerificationConfig,
    sample_for_verification,
    sample_key,
    verify_results,
    wilson_interval,
)
from agent_fleet.domain.model import ChatResponse, ToolCall
from agent_fleet.domain.results import ResultItem
from agent_fleet.errors import BudgetExhausted
from agent_fleet.testing.fakes import FakeGateway


def results(n: int) -> list[ResultItem]:
    return [
        ResultItem(id=f"r{i:04d}", partition_id=f"p{i % 9}", session_id="s", title=f"t{i}", body="b") for i in range(n)
    ]


def test_wilson_interval_matches_known_values() -> None:
    lo, hi = wilson_interval(8, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.4902, 0.9433)
    lo, hi = wilson_interval(0, 10)
    assert lo == pytest.approx(0.0, abs=1e-12) and round(hi, 4) == 0.2775
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo99, hi99 = wilson_interval(8, 10, 0.99)
    assert lo99 < 0.4902 and hi99 > 0.9433


def test_sampling_is_seeded_sized_and_order_free() -> None:
    rs = results(1000)
    a = sample_for_verification(rs, fraction=0.05, minimum=10, seed=4)
    b = sample_for_verification(list(reversed(rs)), fraction=0.05, minimum=10, seed=4)
    c = sample_for_verification(rs, fraction=0.05, minimum=10, seed=5)
    assert len(a) == 50
    assert [x.id for x in a] == [x.id for x in b]
    assert [x.id for x in a] != [x.id for x in c]
    assert len(sample_for_verification(rs[:40], fraction=0.05, minimum=10, seed=0)) == 10  # at least k
    assert len(sample_for_verification(rs[:6], fraction=0.05, minimum=10, seed=0)) == 6  # all there are
    assert len(sample_for_verification(rs, fraction=0.5, minimum=10, seed=0, maximum=30)) == 30


def test_two_runs_of_one_input_draw_the_same_results() -> None:
    """Result ids begin with their run's id; the draw ignores that part, so a resumed run and an
    uninterrupted one (two run ids) verify the same partitions' results — and pay the same."""

    def of_run(run_id: str) -> list[ResultItem]:
        return [
            ResultItem(
                id=f"{run_id}.s{i % 97:05d}.r{i // 97:04d}",
                partition_id=f"p{i % 97}",
                session_id="s",
                title="t",
                body="b",
            )
            for i in range(2000)
        ]

    a = sample_for_verification(of_run("run-01a2370ae1"), fraction=0.05, minimum=5, seed=0)
    b = sample_for_verification(of_run("run-9f00c4d2b7"), fraction=0.05, minimum=5, seed=0)
    assert len(a) == 100
    assert [r.id.partition(".")[2] for r in a] == [r.id.partition(".")[2] for r in b]
    assert (
        sample_key(0, "run-a.s00001.r0000")
        == sample_key(0, "run-b.s00001.r0000")
        != sample_key(0, "run-a.s00001.r0001")
    )


class KnownRefuter:
    """Refutes exactly the results in ``refute``; unsure on ``unsure``; confirms the rest."""

    def __init__(self, refute: set[str], unsure: frozenset[str] = frozenset()) -> None:
        self.refute = refute
        self.unsure = unsure
        self.calls = 0

    async def judge(self, result: ResultItem, partition_items: Sequence[str]) -> Verdict:
        self.calls += 1
        assert partition_items == [result.partition_id]
        if result.id in self.unsure:
            return Verdict(VerdictKind.UNSURE, "cannot tell", "fake")
        if result.id in self.refute:
            return Verdict(VerdictKind.REFUTE, "not in the input", "fake")
        return Verdict(VerdictKind.CONFIRM, "supported", "fake")


async def test_known_20_percent_refuted_is_reported_and_alarms_below_threshold() -> None:
    rs = results(2000)
    cfg = VerificationConfig(fraction=0.05, minimum=20, seed=11, threshold=0.9)
    sample = sample_for_verification(rs, fraction=cfg.fraction, minimum=cfg.minimum, seed=cfg.seed)
    refute = {x.id for x in sample[: len(sample) // 5]}  # exactly 20 % of the sample
    report = await verify_results(rs, KnownRefuter(refute), lambda x: [x.partition_id], config=cfg)
    assert (report.sampled, report.confirmed, report.refuted, report.unsure) == (100, 80, 20, 0)
    assert report.agreement == pytest.approx(0.8)
    lo, hi = report.interval
    assert lo < 0.8 < hi
    assert report.alarm and report.needs_review
    event = report.alarm_event()
    assert event is not None and event["kind"] == "verification_agreement"
    assert "80.0%" in event["message"]
    ok = await verify_results(
        rs,
        KnownRefuter(refute),
        lambda x: [x.partition_id],
        config=VerificationConfig(fraction=0.05, minimum=20, seed=11, threshold=0.7),
    )
    assert not ok.alarm and ok.alarm_event() is None
    annotated = {x.id: x for x in report.annotate(rs)}
    some_refuted = next(iter(refute))
    assert annotated[some_refuted].extra["verification"]["status"] == "refute"
    assert "verification" not in annotated[next(x.id for x in rs if x.id not in report.verdicts)].extra


async def test_interval_covers_a_random_20_percent_refuter_at_its_confidence() -> None:
    # A verifier that refutes each result with probability 0.2: the 95 % interval should cover the
    # true agreement 0.8 in about 95 % of runs.
    rng = random.Random(2026)
    rs = results(400)
    covered = 0
    trials = 300
    for trial in range(trials):
        refute = {x.id for x in rs if rng.random() < 0.2}
        cfg = VerificationConfig(fraction=0.1, minimum=10, seed=trial, threshold=0.9)
        report = await verify_results(rs, KnownRefuter(refute), lambda x: [x.partition_id], config=cfg)
        lo, hi = report.interval
        covered += lo <= 0.8 <= hi
    assert 0.90 <= covered / trials <= 0.99


async def test_unsure_is_not_agreement_and_all_unsure_alarms() -> None:
    rs = results(10)
    ids = frozenset(x.id for x in rs)
    report = await verify_results(
        rs, KnownRefuter(set(), unsure=ids), lambda x: [x.partition_id], config=VerificationConfig(minimum=10)
    )
    assert report.unsure == 10 and report.agreement is None
    assert report.alarm
    assert "no decisive verdict" in (report.alarm_event() or {})["message"]


class BudgetStops:
    def __init__(self, after: int) -> None:
        self.after = after
        self.calls = 0

    async def judge(self, result: ResultItem, partition_items: Sequence[str]) -> Verdict:
        self.calls += 1
        if self.calls > self.after:
            raise BudgetExhausted("run budget reached", scope="run")
        return Verdict(VerdictKind.CONFIRM, "ok")


async def test_budget_exhaustion_leaves_the_rest_unverified() -> None:
    rs = results(30)
    cfg = VerificationConfig(fraction=1.0, minimum=1, concurrency=1)
    report = await verify_results(rs, BudgetStops(after=12), lambda x: [], config=cfg)
    assert len(report.verdicts) == 12
    assert len(report.skipped) == 18
    assert all("budget" in why for why in report.skipped.values())
    assert report.to_dict()["not_verified"] == 18
    marked = [x for x in report.annotate(rs) if x.extra.get("verification", {}).get("status") == "not_verified"]
    assert len(marked) == 18


def verdict_gateway(arguments: str | None, name: str = "submit_verdict") -> FakeGateway:
    """The paid-model boundary answering every call with one scripted tool call."""
    calls = () if arguments is None else (ToolCall("c1", name, arguments),)
    return FakeGateway(lambda _sid, _request: ChatResponse(content=None, tool_calls=calls, model="verifier-model"))


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (json.dumps({"verdict": "refute", "reason": "line 3 has no such call"}), VerdictKind.REFUTE),
        (json.dumps({"verdict": "Confirm", "reason": "yes"}), VerdictKind.CONFIRM),
        ("{not json", VerdictKind.UNSURE),
        (json.dumps({"verdict": "maybe"}), VerdictKind.UNSURE),
        (None, VerdictKind.UNSURE),
    ],
)
async def test_model_verifier_reads_the_submit_verdict_call(arguments: str | None, expected: VerdictKind) -> None:
    gw = verdict_gateway(arguments)
    result = ResultItem(id="r1", partition_id="p3", session_id="s", title="Bug", body="x is None", location="a.py")
    verifier = ModelVerifier(gw, model="cheap", session_for=lambda x: f"run.verify.{x.id}", max_input_chars=20)
    verdict = await verifier.judge(result, ["a.py: def f(): pass", "b.py: " + "y" * 50])
    assert verdict.verdict == expected
    (session_id, request) = gw.calls[0]
    assert session_id == "run.verify.r1"
    assert [t.name for t in request.tools] == ["submit_verdict"]
    user = request.messages[-1]["content"]
    assert "a.py: def f(): pass" in user and "1 more items not shown" in user
    assert "Title: Bug" in user and "Location: a.py" in user
