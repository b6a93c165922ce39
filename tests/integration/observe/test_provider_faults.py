"""Nine provider faults through real runs: each is counted under its own error kind, and the run's
summary, its Prometheus metrics and its session events agree on every count.

The provider is a small aiohttp server on loopback that answers every chat call with one fault;
"connection refused" is a server that stops listening once the start-up check has reached it.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from agent_fleet.domain.error_kinds import ErrorKind
from agent_fleet.domain.events import EventType
from agent_fleet.engine import RunOptions, deploy
from agent_fleet.errors import ProviderDown
from agent_fleet.observe.metrics import metrics_key
from agent_fleet.observe.summary import run_figures
from agent_fleet.session.store import open_store

KEY = "sk-faults-" + "c0ffee" * 4

_ERR = "application/json"
FAULTS: dict[str, tuple[int, Any, dict[str, str]]] = {
    "auth": (401, {"error": {"type": "invalid_request_error", "code": "invalid_api_key", "message": "bad key"}}, {}),
    "forbidden": (403, {"error": {"type": "permission_error", "message": "this key may not use the project"}}, {}),
    "model_not_found": (
        404,
        {"error": {"code": "model_not_found", "message": "The model `gpt-4.1-mini` does not exist"}},
        {},
    ),
    "rate_limited": (
        429,
        {"error": {"type": "requests", "code": "rate_limit_exceeded", "message": "Rate limit reached"}},
        {"retry-after": "0", "x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "30"},
    ),
    "quota": (429, {"error": {"type": "insufficient_quota", "code": "insufficient_quota", "message": "quota"}}, {}),
    "server": (500, {"error": {"type": "server_error", "message": "boom"}}, {}),
    "bad_response": (200, "<html><body>Please sign in</body></html>", {}),
}


class FaultServer:
    def __init__(self, fault: str) -> None:
        self.fault = fault
        self.calls = 0
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self.base_url = ""

    async def models(self, request: web.Request) -> web.Response:
        if self.fault == "unreachable" and self._site is not None:
            site, self._site = self._site, None
            asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(site.stop()))
        return web.json_response({"object": "list", "data": []})

    async def chat(self, request: web.Request) -> web.Response:
        await request.read()
        self.calls += 1
        if self.fault == "timeout":
            await asyncio.sleep(3)
        status, body, headers = FAULTS.get(self.fault, (500, {"error": {"message": "?"}}, {}))
        text = body if isinstance(body, str) else json.dumps(body)
        kind = "text/html" if isinstance(body, str) else _ERR
        return web.Response(status=status, text=text, headers=headers, content_type=kind)

    async def __aenter__(self) -> FaultServer:
        app = web.Application()
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/chat/completions", self.chat)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self._site = web.TCPSite(self._runner, "127.0.0.1", port)
        await self._site.start()
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()


@pytest.fixture
async def workdir(tmp_path: Path) -> AsyncIterator[Path]:
    yield tmp_path


def _config(path: Path) -> str:
    cfg = path / "fleet.yaml"
    cfg.write_text(
        "rate_limit: {max_attempts: 2}\n"
        "provider: {timeout_s: 0.5, give_up_after_s: 30}\n"
        "verification: {fraction: 0, minimum: 0}\n"
    )
    return str(cfg)


def _metric_errors(text: str) -> Counter[str]:
    out: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        if family.name != "fleet_llm_requests":
            continue
        for sample in family.samples:
            if sample.name.endswith("_total") and sample.labels["outcome"] != "ok" and sample.value:
                out[sample.labels["outcome"]] += int(sample.value)
    return out


def _event_errors(events: list[Any]) -> Counter[str]:
    out: Counter[str] = Counter()
    for ev in events:
        if ev.type == EventType.MODEL_ERROR:
            out.update(ev.data.get("retried", ()))
            out[ev.data["kind"]] += 1
        elif ev.type == EventType.MODEL_RESPONSE:
            out.update(ev.data["response"].get("retried", ()))
    return out


async def _figures(store: str, run_id: str) -> tuple[dict[str, int], Counter[str], Counter[str]]:
    async with open_store(store) as log:
        sessions = await log.list_sessions(run_id)
        events = await log.events_of_run(run_id)
        summary = run_figures(sessions, events, await log.get_events(run_id)).to_summary()
        snap = await log.get_snapshot(metrics_key(run_id))
    assert snap is not None, "the run stored no metrics"
    return summary["errors"], _metric_errors(snap["text"]), _event_errors(events)


KINDS = [*FAULTS, "timeout", "unreachable"]


@pytest.mark.parametrize("fault", KINDS)
async def test_each_fault_is_counted_under_its_own_kind_everywhere(workdir: Path, fault: str) -> None:
    items = workdir / "items.txt"
    items.write_text("alpha\nbeta\n")
    store = f"sqlite:///{workdir / 'fleet.db'}"
    out = workdir / "out"
    async with FaultServer(fault) as server:
        options = RunOptions(
            task="Review",
            input_path=str(items),
            agents=2,
            provider=server.base_url,
            out_dir=str(out),
            max_attempts=1,
            config_path=_config(workdir),
            embedder="lexical",
        )
        stopped: ProviderDown | None = None
        run_id = f"run-{fault.replace('_', '')}"
        try:
            report = await deploy(options, store_url=store, api_key=KEY, run_id=run_id)
        except ProviderDown as exc:  # refused credentials stop the run at once
            stopped = exc
    summary_errors, metric_errors, event_errors = await _figures(store, run_id)
    if stopped is None:
        written = json.loads((out / "summary.json").read_text())
        assert written["errors"] == summary_errors
        assert report.summary["errors"] == summary_errors
        assert written["sessions"]["failed"] == 2 and written["status"] != "completed"
    if fault in (ErrorKind.AUTH, ErrorKind.FORBIDDEN, ErrorKind.QUOTA):  # no session can go on: the run stops
        assert stopped is not None and stopped.exit_code == 4
        status = FAULTS[fault][0]
        what = "is out of quota" if fault == ErrorKind.QUOTA else "refused the credentials"
        assert f"{what}: 127.0.0.1" in str(stopped) and f"answered {status}" in str(stopped), str(stopped)
        assert "\n" not in str(stopped) and KEY not in str(stopped)
        async with open_store(store) as log:
            assert not [r for r in await log.list_sessions(run_id) if r.state.terminal]
    else:
        assert stopped is None
    assert set(summary_errors) == {str(k) for k in ErrorKind}  # every kind listed, zero included
    assert summary_errors[fault] > 0
    assert {k: n for k, n in summary_errors.items() if n} == {fault: summary_errors[fault]}
    assert dict(metric_errors) == {fault: summary_errors[fault]}
    assert dict(event_errors) == {fault: summary_errors[fault]}
    if fault != "unreachable":
        assert server.calls >= summary_errors[fault]  # each counted attempt was a real request
