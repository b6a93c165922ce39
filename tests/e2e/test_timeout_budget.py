"""The budget drill with timeouts instead of crashes.

The simulated provider stalls a share of the calls past the engine's time limit and answers them
late anyway: it bills work whose answer nobody heard. A timed-out call is charged at its reservation
and recorded as re-sent (``model_resent``, as after a crash), so for every session the log's spend
covers what the provider billed it, and no session's bill passes its budget by more than one call.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_fleet.brain.protocol import first_user_message
from agent_fleet.domain.events import EventType
from agent_fleet.domain.plan import Partition
from agent_fleet.session import open_store
from agent_fleet.sim.provider import SimConfig, sim_provider_process

from .conftest import Cli, write_lines

CAP = 1500  # tokens per session: a session of four pages would spend more, and a timeout costs a call
TASK = "Summarise each page"


@pytest.fixture(scope="module")
def stalling_url() -> Iterator[str]:
    """A third of the calls stall 2 s (the engine gives up after 1 s of silence), then are answered."""
    config = SimConfig(
        latency=0.02, rate_stall=0.3, stall_seconds=2.0, stall_drop=0.0, seed=11, bill_by_conversation=True
    )
    with sim_provider_process(config) as url:
        yield url


def _stats(base_url: str) -> dict[str, Any]:
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/sim/stats", timeout=5) as resp:
        return dict(json.loads(resp.read()))


async def test_timed_out_calls_are_charged_and_every_session_stays_within_budget_plus_one_call(
    tmp_path: Path, stalling_url: str
) -> None:
    cli = Cli(cwd=tmp_path, base_url=stalling_url, store=f"sqlite:///{tmp_path / 'fleet.db'}")
    (tmp_path / "fleet.yaml").write_text(
        "provider: {timeout_s: 1, give_up_after_s: 120}\nverification: {fraction: 0, minimum: 0}\n"
    )
    src = write_lines(tmp_path / "urls.txt", 80)
    args = ("--task", TASK, "--input", str(src), "--agents", "20", "--embedder", "lexical")
    code, summary = cli.json(
        "deploy", *args, "--max-tokens", "400", "--budget-tokens", str(CAP), "--config", str(tmp_path / "fleet.yaml")
    )
    stats = _stats(stalling_url)
    assert code in (0, 1, 3), summary
    assert stats["stalls"] > 0 and summary["llm_calls_resent"] > 0, (stats["stalls"], summary)
    billed_total = stats["tokens_in"] + stats["tokens_out"]
    assert summary["tokens"]["total"] + summary["tokens_resent"]["total"] >= billed_total
    bills: dict[str, int] = stats["billed_by_conversation"]

    one_call = 0  # the largest call: a timed-out call's reservation (prompt estimate + max_tokens)
    per_session: list[tuple[str, int, int]] = []
    async with open_store(cli.store) as log:
        for rec in await log.list_sessions(summary["run_id"]):
            events = await log.get_events(rec.session_id)
            created = events[0].data
            first = first_user_message(TASK, Partition.from_dict(created["partition"]))
            spent = 0
            for e in events:
                if e.type == EventType.MODEL_RESENT:
                    spent += int(e.data["tokens"])
                    one_call = max(one_call, int(e.data["tokens"]))
                elif e.type == EventType.MODEL_RESPONSE:
                    usage = e.data["response"]["usage"]
                    spent += int(usage["input_tokens"]) + int(usage["output_tokens"])
            per_session.append((rec.session_id, spent, bills.get(first, 0)))
    assert one_call > 0 and len(per_session) == 20
    for sid, spent, bill in per_session:
        assert bill <= spent, (sid, bill, spent)  # every billed token is in the session's figures
        assert bill <= CAP + one_call, (sid, bill, CAP, one_call)
    print(
        f"\nstalls {stats['stalls']} · resent {summary['llm_calls_resent']} · billed {billed_total:,} · "
        f"figures {summary['tokens']['total']:,} + {summary['tokens_resent']['total']:,} · "
        f"max session bill {max(b for _, _, b in per_session):,} of cap {CAP:,} + {one_call:,}"
    )
