"""1,000 concurrent sessions against the simulated provider with a 50-call cap."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from .conftest import Cli, write_lines


def _sim(base_url: str, path: str, method: str = "GET") -> dict[str, object]:
    root = base_url.removesuffix("/v1")
    req = urllib.request.Request(root + path, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=10) as resp:
        body = resp.read()
    return json.loads(body) if body else {}


def test_1000_sessions_complete_under_a_50_call_cap(cli: Cli, tmp_path: Path) -> None:
    src = write_lines(tmp_path / "items.txt", 1000)
    _sim(cli.base_url, "/sim/reset", "POST")
    code, summary = cli.json(
        "deploy", "--task", "Classify", "--input", str(src), "--agents", "1000", "--embedder", "lexical"
    )
    assert code == 0, summary
    assert summary["sessions"]["completed"] == 1000
    assert summary["results_raw"] == 1000
    stats = _sim(cli.base_url, "/sim/stats")
    # every session was admitted at once (pods quota = 1,000); the gateway kept the provider at 50
    assert 40 <= stats["max_in_flight"] <= 50
    assert summary["llm_calls"] == 2000 + summary["verification"]["calls"]  # agents, then verifiers
