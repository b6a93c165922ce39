"""OpenTelemetry spans from the session log (extra ``otel``), with the real SDK.

* With the in-memory exporter: one ``chat`` span per model call, its ``gen_ai.usage.input_tokens`` /
  ``output_tokens`` equal to the metered figures of that call, under its session's span, under the
  run's; one ``execute_tool`` span per tool call.
* Over OTLP/HTTP to a collector on loopback: ``agent-fleet deploy`` with ``OTEL_EXPORTER_OTLP_ENDPOINT``
  set exports the same spans (decoded from the protobuf the exporter sent).
* Off (no switch in the environment): a run never imports ``opentelemetry``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent_fleet.domain.events import EventType
from agent_fleet.engine import RunOptions, deploy
from agent_fleet.session import open_store
from agent_fleet.sim.provider import SimConfig, SimProvider, sim_provider_process

KEY = "sk-otel-test-" + "9d4e" * 5
EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module")
def exporter() -> InMemorySpanExporter:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(provider)  # the application's provider: the fleet's spans go to it
    return EXPORTER


def write_items(path: Path, n: int) -> str:
    path.write_text("".join(f"request {i}: please add an option to export the {i}th report\n" for i in range(n)))
    return str(path)


async def calls_in_log(store: str, run_id: str) -> tuple[dict[tuple[str, int], dict[str, int]], int]:
    """Each model call's metered usage by (session, turn), and how many tool calls were recorded."""
    async with open_store(store) as log:
        events = await log.events_of_run(run_id, [EventType.MODEL_RESPONSE, EventType.TOOL_CALL])
    usage = {
        (e.session_id, int(e.data["turn"])): e.data["response"]["usage"]
        for e in events
        if e.type == EventType.MODEL_RESPONSE
    }
    return usage, sum(1 for e in events if e.type == EventType.TOOL_CALL)


async def test_one_span_per_model_call_with_the_metered_tokens(
    exporter: InMemorySpanExporter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEET_TELEMETRY", "1")
    exporter.clear()
    store = f"sqlite:///{tmp_path / 'fleet.db'}"
    async with SimProvider(SimConfig(latency=0.005)) as sim:
        options = RunOptions(
            task="Classify each request",
            input_path=write_items(tmp_path / "items.txt", 24),
            agents=4,
            provider=sim.base_url,
            out_dir=str(tmp_path / "out"),
            embedder="lexical",
        )
        report = await deploy(options, store_url=store, api_key=KEY)
    usage, tool_calls = await calls_in_log(store, report.run_id)
    spans = exporter.get_finished_spans()
    chats = [s for s in spans if s.attributes and s.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(chats) == len(usage) > 0  # one span per model call
    for span in chats:
        a = span.attributes
        assert a is not None
        metered = usage[(str(a["fleet.session_id"]), int(a["fleet.turn"]))]  # type: ignore[arg-type]
        assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (
            metered["input_tokens"],
            metered["output_tokens"],
        )
        assert a["gen_ai.request.model"] == "gpt-4.1-mini" and a["gen_ai.provider.name"] == "openai"
        assert a["gen_ai.system"] == "openai" and float(a["fleet.cost_usd"]) > 0  # type: ignore[arg-type]
        assert span.start_time is not None and span.end_time is not None and span.start_time <= span.end_time
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    (run,) = [s for s in spans if s.name == "fleet.run"]
    assert run.attributes is not None and run.attributes["fleet.status"] == "completed"
    assert run.attributes["fleet.cost_usd"] == report.summary["cost_usd"]
    sessions = [s for s in spans if s.name == "invoke_agent fleet-agent"]
    assert len(sessions) == 4
    assert all(s.parent is not None and s.parent.span_id == run.context.span_id for s in sessions)
    for chat in chats:
        assert chat.parent is not None and _parent(by_id, chat).name == "invoke_agent fleet-agent"
    tools = [s for s in spans if s.name.startswith("execute_tool ")]
    assert len(tools) == tool_calls > 0
    assert {s.name for s in tools} == {"execute_tool submit_result", "execute_tool finish"}


def _parent(by_id: dict[int, ReadableSpan], span: ReadableSpan) -> ReadableSpan:
    assert span.parent is not None
    return by_id[span.parent.span_id]


# -- OTLP over loopback --------------------------------------------------------------------------


@asynccontextmanager
async def collector() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    """An OTLP/HTTP trace receiver on loopback: the spans it was sent, attributes decoded."""
    received: list[dict[str, Any]] = []

    async def traces(request: web.Request) -> web.Response:
        message = ExportTraceServiceRequest()
        message.ParseFromString(await request.read())
        for resource in message.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    attrs = {kv.key: _value(kv.value) for kv in span.attributes}
                    received.append({"name": span.name, "attributes": attrs})
        return web.Response(body=b"", content_type="application/x-protobuf")

    app = web.Application()
    app.router.add_post("/v1/traces", traces)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}", received
    finally:
        await runner.cleanup()


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with sim_provider_process(SimConfig(latency=0.005)) as url:
        yield url


def cli_env(tmp_path: Path, url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "OPENAI_", "ANTHROPIC_", "OTEL_"))}
    env.update(FLEET_BASE_URL=url, FLEET_API_KEY=KEY, FLEET_STORE=f"sqlite:///{tmp_path / 'fleet.db'}", **extra)
    return env


async def test_deploy_exports_spans_over_otlp_when_the_endpoint_is_set(sim_url: str, tmp_path: Path) -> None:
    async with collector() as (endpoint, received):
        args = ["deploy", "--task", "Classify", "--input", write_items(tmp_path / "i.txt", 12), "--agents", "3"]
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "agent_fleet.cli",
            *args,
            "--embedder",
            "lexical",
            "--json",
            cwd=tmp_path,
            env=cli_env(tmp_path, sim_url, OTEL_EXPORTER_OTLP_ENDPOINT=endpoint),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()[-2000:]
    summary = json.loads(out)
    usage, _ = await calls_in_log(f"sqlite:///{tmp_path / 'fleet.db'}", summary["run_id"])
    chats = [s["attributes"] for s in received if s["attributes"].get("gen_ai.operation.name") == "chat"]
    assert len(chats) == len(usage) > 0
    assert sum(a["gen_ai.usage.input_tokens"] for a in chats) == sum(u["input_tokens"] for u in usage.values())
    assert sum(a["gen_ai.usage.output_tokens"] for a in chats) == sum(u["output_tokens"] for u in usage.values())
    assert [s["name"] for s in received].count("fleet.run") == 1
    assert KEY not in json.dumps(received)


def test_without_the_switch_a_run_never_imports_opentelemetry(sim_url: str, tmp_path: Path) -> None:
    script = (
        "import asyncio, json, sys\n"
        "from agent_fleet.engine import RunOptions, deploy\n"
        f"o = RunOptions(task='t', input_path={write_items(tmp_path / 'i.txt', 4)!r}, agents=2,"
        f" provider={sim_url!r}, embedder='lexical', out_dir={str(tmp_path / 'out')!r})\n"
        f"r = asyncio.run(deploy(o, store_url={'sqlite:///' + str(tmp_path / 'f.db')!r}, api_key='sk-x'))\n"
        "print(json.dumps([r.status, sorted(m for m in sys.modules if m.startswith('opentelemetry'))]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], env=cli_env(tmp_path, sim_url), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == ["completed", []]
