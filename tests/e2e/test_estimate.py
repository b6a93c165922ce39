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
