"""A 200-turn session on a model with a 16k-token window, over HTTP against the simulated provider.

With context care the session completes with no context-length error and its log keeps every turn
(the compactions are recorded and metered); without it the same session overflows the window.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent_fleet.brain.context import ContextCare
from agent_fleet.brain.harness import Harness, Outcome
from agent_fleet.brain.step import Limits
from agent_fleet.brain.view import SessionView
from agent_fleet.config import FleetConfig, parse_config
from agent_fleet.domain.events import EventType
from agent_fleet.domain.model import ChatResponse
from agent_fleet.domain.plan import InputKind, Partition
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import ContextLengthExceeded
from agent_fleet.hands.files import PartitionFiles
from agent_fleet.observe.summary import run_figures
from agent_fleet.session.memory import MemorySessionLog
from agent_fleet.sim.http_server import SimProvider
from agent_fleet.sim.settings import SimConfig
from agent_fleet.spend.factory import build_gateway, price_table
from agent_fleet.spend.gateway import Gateway

WINDOW = 16_000
PAGES = 198  # read turns; then one submit_result and one finish: 200 turns
FILES = tuple(f"src/part{i}.py" for i in range(8))
SID = "run-ctx.s00000"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    for i, rel in enumerate(FILES):
        line = "def handler_{i}_{n}(request):\n    return render(request, 'page_{n}.html')\n"
        body = "".join(line.format(i=i, n=n) for n in range(20))
        (root / rel).write_text(body[:1200])  # ~300 tokens a read
    return root


@pytest.fixture
async def sim() -> AsyncIterator[SimProvider]:
    async with SimProvider(SimConfig(context_windows={"sim-small": WINDOW})) as server:
        yield server


def config(base_url: str, provider: str, *, care: bool) -> FleetConfig:
    model = {"name": "small", "provider": provider, "model": "sim-small", "base_url": base_url}
    return parse_config(
        {
            "models": [{**model, "context_window": WINDOW}],
            "budgets": {"session_tokens": None},
            "context": {"care": care},
        }
    )


def limits(cfg: FleetConfig) -> Limits:
    ctx = cfg.context
    care = ContextCare(
        enabled=ctx.care,
        window=price_table(cfg).context_window,
        threshold=ctx.threshold,
        keep_turns=ctx.keep_turns,
        summary_tokens=ctx.summary_tokens,
        trim_step=ctx.trim_step,
    )
    return Limits(max_turns=300, context=care)


async def run(repo: Path, cfg: FleetConfig) -> tuple[MemorySessionLog, Gateway, Any]:
    log = MemorySessionLog()
    await log.open()
    part = Partition("p0000", 0, InputKind.DIRECTORY, FILES, tuple(range(len(FILES))), 10)
    info = {
        "run_id": "run-ctx",
        "partition": part.to_dict(),
        "task": f"Read the partition page by page. fleet-sim: pages {PAGES}",
        "model": "sim-small",
        "max_tokens": 2048,
    }
    await log.emit_event(SID, EventType.SESSION_CREATED, info)
    gw = build_gateway(cfg, api_key="sk-sim-context", env={})
    harness = Harness(log=log, gateway=gw, hands=PartitionFiles(repo, FILES), limits=limits(cfg))
    try:
        return log, gw, await harness.run(SID)
    except ContextLengthExceeded as exc:
        return log, gw, exc
    finally:
        await gw.aclose()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_200_turn_session_fits_a_16k_window(repo: Path, sim: SimProvider, provider: str) -> None:
    began = time.process_time()  # CPU, not wall time: a busy machine slows the wall clock, not the work
    log, gw, out = await run(repo, config(sim.base_url, provider, care=True))
    assert not isinstance(out, Exception), out
    assert out.outcome is Outcome.COMPLETED
    events = await log.get_events(SID)
    kinds = [e.type for e in events]
    assert EventType.MODEL_ERROR not in kinds
    responses = [e for e in events if e.type == EventType.MODEL_RESPONSE]
    assert [int(e.data["turn"]) for e in responses] == list(range(1, PAGES + 3))  # every turn is in the log
    assert kinds.count(EventType.TOOL_RESULT) == PAGES + 2
    # every original tool result is kept whole in the log, whatever the requests sent
    outputs = [e.data["output"] for e in events if e.type == EventType.TOOL_RESULT and e.data["name"] == "read_file"]
    assert len(outputs) == PAGES and all(len(o) == 1200 for o in outputs)
    compactions = [e for e in events if e.type == EventType.CONTEXT_COMPACTED]
    assert compactions, "a 200-turn session on a 16k window needs at least one compaction"
    spans = [(int(e.data["from_turn"]), int(e.data["through_turn"])) for e in compactions]
    assert spans[0][0] == 1 and all(b[0] == a[1] + 1 for a, b in itertools.pairwise(spans))
    for ev in compactions:
        assert ev.data["summary"].startswith("Turns ")
        assert ev.data["tokens_after"] < ev.data["tokens_before"]
    # the compactions are metered: the session's usage counts them beside the turns
    turn_usage = sum((ChatResponse.from_dict(e.data["response"]).usage for e in responses), Usage())
    summary_usage = sum((ChatResponse.from_dict(e.data["response"]).usage for e in compactions), Usage())
    assert summary_usage.total_tokens > 0
    view = SessionView.from_events(events)
    assert view.usage.total_tokens == turn_usage.total_tokens + summary_usage.total_tokens
    tally = gw.session_usage(SID)
    assert (tally.calls, tally.total_tokens) == (len(responses) + len(compactions), view.usage.total_tokens)
    # ... and so do the run's figures (summary.json, the dashboard) folded from the log
    figures = run_figures([], events)
    assert (figures.llm_calls, figures.usage.total_tokens) == (tally.calls, tally.total_tokens)
    # every request the provider saw fitted the window: none was refused
    assert all("400" not in by_status for by_status in sim.stats()["requests"].values())
    assert time.process_time() - began < 10  # about 0.8 s: no cost that grows with the turns runs away


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_without_context_care_the_session_overflows(repo: Path, sim: SimProvider, provider: str) -> None:
    log, _gw, out = await run(repo, config(sim.base_url, provider, care=False))
    assert isinstance(out, ContextLengthExceeded)
    errors = [e for e in await log.get_events(SID) if e.type == EventType.MODEL_ERROR]
    assert [e.data["kind"] for e in errors] == ["context_length"]
    assert errors[0].data["status"] == 400
    assert 20 < int(errors[0].data["turn"]) < 60
