"""Deduplication with the provider's embeddings, through the gateway: metered, and in the run's log."""

from __future__ import annotations

from pathlib import Path

from agent_fleet.domain.events import EventType
from agent_fleet.domain.usage import Usage
from agent_fleet.session import open_store

from .conftest import Cli, write_lines


async def test_provider_embedder_is_metered_and_recorded(cli: Cli, tmp_path: Path) -> None:
    src = write_lines(tmp_path / "urls.txt", 80)
    code, summary = cli.json(
        "deploy",
        "--task",
        "Summarise",
        "--input",
        str(src),
        "--agents",
        "8",
        "--embedder",
        "provider",
        "--embedding-model",
        "text-embedding-3-small",
        # each result is about its own URL and is compared with none: the global scope compares them all
        "--dedup-scope",
        "global",
    )
    assert code == 0, summary
    assert summary["dedup"]["embedder"].startswith("provider:text-embedding-3-small")
    assert summary["dedup"]["embedded"] > 0
    async with open_store(cli.store) as log:
        run_events = await log.get_events(summary["run_id"])
        agent_calls = len(await log.events_of_run(summary["run_id"], [EventType.MODEL_RESPONSE]))
    spent = [e.data for e in run_events if e.type == EventType.EMBEDDINGS]
    assert spent, "embedding spend is recorded in the run's log"
    tokens = sum(Usage.from_dict(d["usage"]).input_tokens for d in spent)
    assert tokens > 0
    verification = next(e.data for e in run_events if e.type == EventType.VERIFICATION)
    embedding_calls = sum(d["calls"] for d in spent)
    assert summary["llm_calls"] == agent_calls + verification["calls"] + embedding_calls
