"""`agent-fleet metrics`: Prometheus text with fleet_* figures equal to the summary, and Kueue's names."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from .conftest import Cli, write_lines


def test_metrics_match_the_summary(cli: Cli, tmp_path: Path) -> None:
    src = write_lines(tmp_path / "urls.txt", 50)
    code, summary = cli.json(
        "deploy", "--task", "Summarise", "--input", str(src), "--agents", "5", "--embedder", "lexical"
    )
    assert code == 0
    proc = cli.run("metrics", summary["run_id"])
    assert proc.returncode == 0, proc.stderr
    samples = {
        (s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "run"))): s.value
        for family in text_string_to_metric_families(proc.stdout)
        for s in family.samples
    }
    tokens = sum(v for (name, _), v in samples.items() if name == "fleet_tokens_total")
    assert tokens == summary["tokens"]["total"]
    calls = sum(v for (name, labels), v in samples.items() if name == "fleet_llm_requests_total")
    assert calls == summary["llm_calls"]
    assert samples[("fleet_sessions", (("state", "completed"),))] == 5
    assert (
        samples[("fleet_dedup_ratio", ())] == summary["dedup_rate"]
        or abs(samples[("fleet_dedup_ratio", ())] - summary["dedup_rate"]) < 1e-4
    )
    assert ("kueue_pending_workloads", (("cluster_queue", "default"), ("status", "active"))) in samples
    assert (Path(summary["out_dir"]) / "metrics.prom").read_text() == proc.stdout
    assert cli.run("metrics").stdout == proc.stdout  # the newest run by default
