"""`deploy --task "Summarise these pages: URL1 … URL12"` with no --input: one session per URL (up to
--agents), each URL in exactly one; a one-line question runs one session and the plan says why."""

from __future__ import annotations

from .conftest import Cli

URLS = [f"https://docs.python.org/3/library/page-{i}.html" for i in range(1, 13)]
TASK = "Summarise these pages: " + " … ".join(URLS)


def _partition_items(cli: Cli, run_id: str, sessions: int) -> list[str]:
    seen: list[str] = []
    for n in range(sessions):
        code, out = cli.json("events", f"{run_id}.s{n:05d}")
        assert code == 0
        created = out["events"][0]
        assert created["type"] == "session_created"
        assert created["data"]["task"] == "Summarise these pages:"
        seen += created["data"]["partition"]["items"]
    return seen


def test_twelve_urls_in_the_task_run_twelve_sessions_each_url_once(cli: Cli) -> None:
    code, summary = cli.json("deploy", "--task", TASK, "--agents", "20", "--embedder", "lexical")
    assert code == 0, summary
    assert summary["partitions"] == 12
    assert summary["sessions"]["completed"] == 12
    seen = _partition_items(cli, summary["run_id"], 12)
    assert sorted(seen) == sorted(URLS)
    # a note per page: never merged across pages, each known by its URL
    assert summary["dedup_scope"]["scope"] == "auto" and summary["dedup_scope"]["identity"]["location"] == 12
    assert summary["results_unique"] == 12


def test_fewer_agents_than_urls_and_a_one_line_question(cli: Cli) -> None:
    code, est = cli.json("deploy", "--task", TASK, "--agents", "5", "--dry-run")
    assert code == 0 and est["plan"]["partitions"] == 5 and est["plan"]["items"] == 12
    code, est = cli.json("deploy", "--task", "What is the capital of France?", "--agents", "50", "--dry-run")
    assert code == 0 and est["plan"]["partitions"] == 1
    assert any("one session works on the task" in n for n in est["plan"]["notes"])
