"""The dashboard's endpoints over real HTTP on loopback, reading a SQLite store another log writes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from agent_fleet.admission import AdmissionController, default_objects
from agent_fleet.clock import VirtualClock
from agent_fleet.domain.events import EventType
from agent_fleet.observe.dashboard import FleetReader, ReaderOptions, dashboard_app
from agent_fleet.session.port import SessionLog
from agent_fleet.session.store import open_store
from agent_fleet.testing.processes import stop

sys.path.insert(0, str(Path(__file__).parents[2] / "unit" / "observe"))
from dashboard_builders import answer, create_run, store_metrics


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[tuple[SessionLog, str]]:
    """A writer on the store (as a run's process is) and the URL the dashboard opens."""
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    writer = open_store(url)
    async with writer:
        yield writer, url


@pytest.fixture
async def served(store: tuple[SessionLog, str]) -> AsyncIterator[str]:
    _, url = store
    log = open_store(url)
    async with log:
        reader = FleetReader(log, options=ReaderOptions(interval=0.05))
        runner = web.AppRunner(dashboard_app(reader))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            await runner.cleanup()


async def _json(http: aiohttp.ClientSession, url: str) -> tuple[int, Any]:
    async with http.get(url) as resp:
        return resp.status, await resp.json()


async def _sse(resp: aiohttp.ClientResponse) -> AsyncIterator[tuple[str, Any]]:
    event = ""
    async for raw in resp.content:
        line = raw.decode().rstrip("\n")
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            yield event, json.loads(line[6:])


async def test_page_and_assets_ship_in_the_package(served: str) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(served + "/") as resp:
            assert resp.status == 200
            page = await resp.text()
        assert "static/vendor/uplot/uPlot.iife.min.js" in page
        assert "//cdn" not in page and "https://" not in page
        for asset in ("vendor/uplot/uPlot.iife.min.js", "vendor/uplot/LICENSE", "dashboard.js", "dashboard.css"):
            async with http.get(f"{served}/static/{asset}") as resp:
                assert resp.status == 200, asset
                assert len(await resp.read()) > 500, asset


async def test_metrics_are_prometheus_text_with_kueue_and_fleet_families(
    served: str, store: tuple[SessionLog, str]
) -> None:
    writer, _ = store
    sids = await create_run(writer, "run-a", 2, options={"team": "alpha", "budget_tokens": 100})
    await answer(writer, sids[0], tokens=(80, 5), usd="0.001")
    controller = AdmissionController(default_objects(2), VirtualClock())
    assert controller.metrics is not None
    controller.metrics.record_admission("default", 0.25)
    await store_metrics(writer, "run-a", limit=7, admission=controller.metrics_text())
    async with aiohttp.ClientSession() as http, http.get(served + "/metrics") as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = await resp.text()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }
    assert samples[("kueue_admitted_workloads_total", (("cluster_queue", "default"),))] == 1
    assert samples[("kueue_pending_workloads", (("cluster_queue", "default"), ("status", "inadmissible")))] == 0
    assert samples[("fleet_api_concurrency_limit", (("run", "run-a"),))] == 7
    assert (
        samples[("fleet_session_budget_used_ratio", (("run", "run-a"), ("session", sids[0]), ("team", "alpha")))]
        == 0.85
    )
    assert samples[("fleet_sessions_near_budget", (("team", "alpha"),))] == 1


async def test_errors_are_one_json_shape(served: str, store: tuple[SessionLog, str]) -> None:
    writer, _ = store
    sids = await create_run(writer, "run-a", 1)
    async with aiohttp.ClientSession() as http:
        status, body = await _json(http, served + "/api/runs/run-zzz")
        assert status == 404 and body["error"]["type"] == "not_found" and "run-zzz" in body["error"]["message"]
        status, body = await _json(http, f"{served}/api/sessions/{sids[0]}/events?after=x")
        assert status == 400 and "after" in body["error"]["message"]
        status, body = await _json(http, served + "/api/sessions/nope/events")
        assert status == 404 and body["error"]["type"] == "not_found"
        status, body = await _json(http, served + "/no/such/page")
        assert status == 404 and set(body) == {"error"}


async def test_session_stream_sends_events_as_they_are_written(served: str, store: tuple[SessionLog, str]) -> None:
    writer, _ = store
    sids = await create_run(writer, "run-a", 1)
    async with aiohttp.ClientSession() as http:
        status, body = await _json(http, f"{served}/api/sessions/{sids[0]}/events")
        assert status == 200 and [e["type"] for e in body["events"]] == [EventType.SESSION_CREATED]
        async with http.get(f"{served}/api/sessions/{sids[0]}/stream?after=1") as resp:
            assert resp.headers["Content-Type"] == "text/event-stream"
            events = _sse(resp)
            assert await anext(events) == ("events", [])  # open
            await answer(writer, sids[0], tokens=(10, 1), usd="0")
            name, batch = await asyncio.wait_for(anext(events), 10)
    assert name == "events"
    assert [(e["seq"], e["type"]) for e in batch] == [(2, EventType.MODEL_REQUEST), (3, EventType.MODEL_RESPONSE)]


async def test_overview_stream_follows_the_run(served: str, store: tuple[SessionLog, str]) -> None:
    writer, _ = store
    sids = await create_run(writer, "run-a", 2)
    async with aiohttp.ClientSession() as http, http.get(served + "/api/stream?run=run-a") as resp:
        events = _sse(resp)
        name, first = await anext(events)
        assert name == "overview" and first["tokens_total"] == 0
        name, run = await anext(events)
        assert name == "run" and len(run["session_rows"]) == 2
        await answer(writer, sids[1], tokens=(30, 12), usd="0")
        async with asyncio.timeout(10):
            async for name, data in events:
                if name == "overview" and data["tokens_total"] == 42:
                    break
        assert len(data["series"]) == 1  # a live update carries the newest point only


def test_dashboard_command_serves_a_local_store(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEET_")}
    store = f"sqlite:///{tmp_path / 'fleet.db'}"
    cmd = [sys.executable, "-m", "agent_fleet.cli", "dashboard", "--store", store, "--port", "0", "--json"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        info = json.loads(proc.stdout.readline())

        async def check() -> None:
            async with aiohttp.ClientSession() as http:
                status, body = await _json(http, info["url"] + "api/overview")
                assert status == 200 and body["runs"] == []
                async with http.get(info["metrics_url"]) as resp:
                    assert resp.status == 200 and "fleet_sessions_near_budget" in await resp.text()

        asyncio.run(check())
    finally:
        stop(proc, timeout=30)
    bad = subprocess.run([*cmd[:-3], "--host", "0.0.0.0"], env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "loopback" in bad.stderr


@pytest.fixture
async def served_with_review(store: tuple[SessionLog, str]) -> AsyncIterator[str]:
    from agent_fleet.cli.dashboard import _LogDesk

    _, url = store
    log = open_store(url)
    async with log:
        reader = FleetReader(log, options=ReaderOptions(interval=0.05))
        runner = web.AppRunner(dashboard_app(reader, _LogDesk(log, None)))
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        try:
            yield f"http://127.0.0.1:{runner.addresses[0][1]}"
        finally:
            await runner.cleanup()


async def test_review_queue_and_a_decision_from_the_dashboard(
    served_with_review: str, store: tuple[SessionLog, str]
) -> None:
    writer, _ = store
    sids = await create_run(writer, "run-a", 2)
    await writer.emit_event(sids[1], EventType.SESSION_PAUSED, {"reason": "budget"})
    base = served_with_review
    item = f"paused:{sids[1]}"
    ok_headers = {"X-Fleet-Dashboard": "1", "Origin": base}
    async with aiohttp.ClientSession() as http:
        status, queue = await _json(http, base + "/api/runs/run-a/review")
        assert status == 200
        assert [(i["id"], i["status"]) for i in queue["items"]] == [(item, "open")]
        decision = {"item": item, "decision": "approve", "note": "raised by hand"}
        # a cross-site post (no header, or another origin) is refused and records nothing
        for headers in ({}, {"X-Fleet-Dashboard": "1", "Origin": "http://evil.example"}):
            async with http.post(base + "/api/review", json=decision, headers=headers) as resp:
                assert resp.status == 403 and (await resp.json())["error"]["type"] == "forbidden"
        async with http.post(base + "/api/review", json={**decision, "decision": "maybe"}, headers=ok_headers) as resp:
            assert resp.status == 400
        async with http.post(
            base + "/api/review", json={**decision, "item": "paused:run-zzz.s00001"}, headers=ok_headers
        ) as resp:
            assert resp.status == 404
        async with http.post(base + "/api/review", json=decision, headers=ok_headers) as resp:
            assert resp.status == 200
            done = await resp.json()
        assert done["event"]["type"] == EventType.REVIEW_DECISION
        status, queue = await _json(http, base + "/api/runs/run-a/review")
        assert [(i["id"], i["status"], i["note"]) for i in queue["items"]] == [(item, "approved", "raised by hand")]
        status, body = await _json(http, base + "/api/runs/run-zzz/review")
        assert status == 404 and "run-zzz" in body["error"]["message"]
    decisions = [e for e in await writer.get_events("run-a") if e.type == EventType.REVIEW_DECISION]
    assert len(decisions) == 1 and decisions[0].data["decision"] == "approve"


async def test_without_a_desk_there_is_no_review_queue(served: str) -> None:
    async with aiohttp.ClientSession() as http:
        status, body = await _json(http, served + "/api/runs/run-a/review")
        assert status == 404 and "review" in body["error"]["message"]
        async with http.post(served + "/api/review", json={}, headers={"X-Fleet-Dashboard": "1"}) as resp:
            assert resp.status == 404
