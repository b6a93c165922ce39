"""fleet.yaml models, routing decisions, runaway guards."""

from __future__ import annotations

from decimal import Decimal

import pytest

from agent_fleet.config import FleetConfig, load_config, parse_config
from agent_fleet.domain.plan import InputKind, Partition
from agent_fleet.errors import ConfigError
from agent_fleet.spend.guards import RunawayGuard
from agent_fleet.spend.router import (
    Difficulty,
    Router,
    estimate_difficulty,
    parse_classifier_score,
)

YAML = """
models:
  - {name: fast, provider: openai, model: gpt-4.1-mini, api_key_env: FLEET_API_KEY, tier: simple}
  - {name: mid, provider: openai, model: gpt-4.1, tier: medium}
  - {name: deep, provider: anthropic, model: claude-opus-4-5, tier: complex, fallback: [mid]}
budgets: {session_tokens: 64000, session_usd: 0.5, fleet_usd: 20, queue_usd: {team-a: 5}}
rate_limit: {baseline_concurrency: 30}
prices: {gpt-4.1-mini: {input: 0.5, output: 2}}
queues: kueue.yaml
"""


def test_load_fleet_yaml(tmp_path):
    path = tmp_path / "fleet.yaml"
    path.write_text(YAML)
    cfg = load_config(path)
    assert [m.name for m in cfg.models] == ["fast", "mid", "deep"]
    assert cfg.budgets.session_tokens == 64_000
    assert cfg.budgets.session_usd == Decimal("0.5")
    assert cfg.budgets.queue_usd == {"team-a": Decimal("5")}
    assert cfg.rate_limit.baseline_concurrency == 30
    assert cfg.prices["gpt-4.1-mini"].output == Decimal("2")
    assert cfg.queues == "kueue.yaml"
    assert cfg.model("claude-opus-4-5").name == "deep"
    assert load_config(None) == FleetConfig()
    inline = parse_config({"queues": [{"kind": "ClusterQueue", "metadata": {"name": "cq"}}]})
    assert inline.queues == [{"kind": "ClusterQueue", "metadata": {"name": "cq"}}]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"budgets": {"sesion_tokens": 5}}, "budgets.sesion_tokens: Extra inputs are not permitted"),
        ({"models": [{"name": "a", "model": "x", "tier": "hard"}]}, "models.0.tier"),
        ({"models": [{"name": "a", "model": "x", "provider": "ftp://x"}]}, "provider is openai, anthropic or an"),
        ({"models": [{"name": "a", "model": "x"}, {"name": "a", "model": "y"}]}, "model names must be unique: a"),
        ({"models": [{"name": "a", "model": "x", "fallback": ["zz"]}]}, "falls back to unknown model 'zz'"),
        ([1, 2], "the top level must be a mapping"),
    ],
)
def test_bad_config_is_one_clear_line(data, message):
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    text = str(info.value)
    assert message in text
    assert "\n" not in text


def test_unreadable_or_invalid_yaml(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: [\n  {name: a\n")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_config(bad)


def part(kind: InputKind, tokens: int) -> Partition:
    return Partition(id="p0", index=0, kind=kind, items=("a",), item_ids=(0,), est_tokens=tokens)


def test_difficulty_reads_size_kind_task_and_classifier():
    easy = estimate_difficulty(part(InputKind.LIST, 2_000), "Summarize each page in one line")
    hard = estimate_difficulty(part(InputKind.DIRECTORY, 90_000), "Audit this code for security vulnerabilities")
    assert easy.score < 0.35 < hard.score
    assert hard.score >= 0.7
    assert "directory input" in hard.reason and "hard cue" in hard.reason
    blended = estimate_difficulty(part(InputKind.LIST, 2_000), "Summarize", classifier_score=1.0)
    assert blended.score == pytest.approx(0.5 * easy.score + 0.5)
    assert parse_classifier_score("I'd say 7.") == 0.7
    assert parse_classifier_score("no idea") is None


def test_router_picks_tier_and_falls_back_along_the_chain():
    cfg = parse_config(
        {
            "models": [
                {"name": "fast", "model": "gpt-4.1-mini", "tier": "simple"},
                {"name": "mid", "model": "gpt-4.1", "tier": "medium"},
                {"name": "deep", "model": "claude-opus-4-5", "tier": "complex", "fallback": ["fast"]},
            ]
        }
    )
    router = Router(cfg.models)
    r = router.route(Difficulty(0.9, "difficulty 0.90"))
    assert (r.name, r.tier) == ("deep", "complex")
    assert r.reason == "difficulty 0.90 → tier complex"
    assert router.route(Difficulty(0.1, "d")).name == "fast"
    # the tier's model is out: the nearest tier above
    up = router.route(Difficulty(0.1, "d"), unavailable={"gpt-4.1-mini"})
    assert up.name == "mid" and "no model free in tier simple" in up.reason
    fb = router.fallback("deep", cause="is out of quota")
    assert fb is not None and fb.name == "fast" and fb.reason == "deep is out of quota; declared fallback"
    fb2 = router.fallback("deep", cause="failed", unavailable={"fast"})
    assert fb2 is not None and fb2.name == "mid" and "nearest tier (medium)" in fb2.reason
    assert router.fallback("deep", cause="failed", unavailable={"fast", "mid"}) is None
    assert r.to_event()["model"] == "claude-opus-4-5"
    with pytest.raises(ConfigError):
        router.route(Difficulty(0.5, "d"), unavailable={"fast", "mid", "deep"})


def test_guard_stops_repeated_identical_tool_calls():
    g = RunawayGuard(repeated_tool_calls=3)
    call = [("read_file", '{"path": "a.py"}')]
    assert g.observe_turn(call) is None
    assert g.observe_turn(call) is None
    trip = g.observe_turn(call)
    assert trip is not None and trip.kind == "repeated_tool_call"
    assert "read_file" in trip.message


def test_guard_no_progress_and_max_turns():
    g = RunawayGuard(no_progress_turns=3, repeated_tool_calls=99)
    assert g.observe_turn([("grep", "1")]) is None  # new call: progress
    assert g.observe_turn([("grep", "1")]) is None
    assert g.observe_turn([("grep", "1")]) is None
    trip = g.observe_turn([("grep", "1")])
    assert trip is not None and trip.kind == "no_progress"
    g2 = RunawayGuard(max_turns=3)
    results = [g2.observe_turn([("submit_result", str(i))], produced=True) for i in range(3)]
    assert results[:2] == [None, None]
    assert results[2] is not None and results[2].kind == "max_turns"


def test_budget_mode_reaches_the_gateway():
    from agent_fleet.spend.factory import build_gateway

    env = {"FLEET_API_KEY": "sk-x", "FLEET_BASE_URL": "http://127.0.0.1:9/v1"}
    strict = parse_config({"budgets": {"mode": "strict", "strict_floor_tokens": 256}})
    gw = build_gateway(strict, env=env)
    assert (gw.book.mode, gw.book.strict_floor) == ("strict", 256)
    assert build_gateway(FleetConfig(), env=env).book.mode == "bounded"
    with pytest.raises(ConfigError, match=r"budgets\.mode"):
        parse_config({"budgets": {"mode": "loose"}})
