"""`deploy --dry-run` / `agent-fleet estimate`: a forecast from the plan; after a run, beside the actuals."""

from __future__ import annotations

from pathlib import Path

from .conftest import Cli, write_lines


def test_estimate_forecasts_without_running_then_the_run_reports_it_beside_actuals(cli: Cli, tmp_path: Path) -> None:
    src = write_lines(tmp_path / "urls.txt", 100)
    args = ("--task", "Summarise", "--input", str(src), "--agents", "10", "--embedder", "lexical")
    code, est = cli.json("estimate", *args)
    assert code == 0
    assert est["plan"]["partitions"] == 10 and est["plan"]["items"] == 100
    f = est["forecast"]
    assert f["llm_calls"]["low"] <= f["llm_calls"]["high"]
    assert float(f["cost_usd"]["low"]) <= float(f["cost_usd"]["high"])
    assert f["binding"] in {"api_concurrency", "admission", "budget", "tokens_per_minute", "sessions"}
    assert f["assumptions"]["latency_source"] == "default"  # nothing observed yet in this store
    code, dry = cli.json("deploy", *args, "--dry-run")
    assert code == 0 and dry["forecast"] == f
    _code, runs = cli.json("status")
    assert runs == {"runs": []}  # nothing was run or recorded

    code, summary = cli.json("deploy", *args)
    assert code == 0
    beside = summary["forecast"]
    assert beside["llm_calls"]["actual"] == summary["llm_calls"]
    assert beside["tokens"]["actual"] == summary["tokens"]["total"]
    assert set(beside) >= {"llm_calls", "tokens", "cost_usd", "wall_s", "binding"}
    # the next forecast uses the latency this store has observed
    code, again = cli.json("estimate", *args)
    assert again["forecast"]["assumptions"]["latency_source"] == "observed"

    tight = cli.json("estimate", *args, "--fleet-budget-usd", "0.000001")[1]
    assert tight["forecast"]["binding"] == "budget"


def test_after_one_run_the_forecast_of_a_similar_run_is_learned_and_within_a_quarter(cli: Cli, tmp_path: Path) -> None:
    first = write_lines(tmp_path / "first.txt", 60)
    common = ("--task", "Summarise", "--agents", "6", "--embedder", "lexical")
    code, before = cli.json("estimate", "--input", str(first), *common)
    assert code == 0 and before["forecast"]["prior"]["source"] == "default"
    code, done = cli.json("deploy", "--input", str(first), *common)
    assert code == 0 and done["sessions"]["completed"] == 6

    second = write_lines(tmp_path / "second.txt", 90)  # a similar run, half as large again
    similar = ("--task", "Summarise", "--agents", "9", "--embedder", "lexical")
    code, est = cli.json("estimate", "--input", str(second), *similar)
    assert code == 0
    prior = est["forecast"]["prior"]
    assert prior["source"] == "learned" and prior["runs"] == [done["run_id"]] and prior["sessions"] == 6
    assert prior["model"] == "gpt-4.1-mini"
    code, actual = cli.json("deploy", "--input", str(second), *similar)
    assert code == 0 and actual["sessions"]["completed"] == 9
    calls, tokens = est["forecast"]["llm_calls"], est["forecast"]["tokens"]["total"]
    assert abs(calls["expected"] - actual["llm_calls"]) <= 0.25 * actual["llm_calls"]
    assert abs(tokens["expected"] - actual["tokens"]["total"]) <= 0.25 * actual["tokens"]["total"]
    assert calls["low"] <= actual["llm_calls"] <= calls["high"]
    assert tokens["low"] <= actual["tokens"]["total"] <= tokens["high"]
    # another model learns nothing from these runs
    other = cli.json("estimate", "--input", str(second), *similar, "--model", "gpt-4.1")[1]
    assert other["forecast"]["prior"]["source"] == "default"
