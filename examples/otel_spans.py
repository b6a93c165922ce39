"""OpenTelemetry spans of a fleet run, offline (in-memory exporter; OTLP works the same way).

    pip install 'agent-fleet-manager[otel]' && python examples/otel_spans.py

With ``FLEET_TELEMETRY=1`` (or ``OTEL_EXPORTER_OTLP_ENDPOINT`` set, which exports over OTLP/HTTP
without any code) every run, agent session, model call and tool call becomes a span, from the
session log's durable events. Here the application installs its own tracer provider.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections import Counter
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent_fleet import RunOptions, deploy
from agent_fleet.sim.provider import SimConfig, SimProvider


async def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    os.environ["FLEET_TELEMETRY"] = "1"
    work = Path(tempfile.mkdtemp(prefix="fleet-otel-"))
    (work / "items.txt").write_text("".join(f"question {i}: why does sync {i} fail?\n" for i in range(12)))
    async with SimProvider(SimConfig(latency=0.01)) as sim:
        options = RunOptions(
            task="Answer each question",
            input_path=str(work / "items.txt"),
            agents=3,
            provider=sim.base_url,
            out_dir=str(work / "out"),
            embedder="lexical",
        )
        report = await deploy(options, store_url=f"sqlite:///{work / 'fleet.db'}", api_key="sk-example")
    spans = exporter.get_finished_spans()
    print("spans:", dict(Counter(s.name.split(" ")[0] for s in spans)))
    chats = [s.attributes for s in spans if s.attributes and s.attributes.get("gen_ai.operation.name") == "chat"]
    tokens = sum(int(a["gen_ai.usage.input_tokens"]) + int(a["gen_ai.usage.output_tokens"]) for a in chats)  # type: ignore[call-overload]
    print(f"{len(chats)} model-call spans, {tokens} tokens; run {report.run_id} {report.status}")


if __name__ == "__main__":
    asyncio.run(main())
