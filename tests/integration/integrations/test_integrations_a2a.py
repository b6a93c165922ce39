"""``agent-fleet serve`` as an A2A agent, driven by the official ``a2a-sdk`` client.

The server runs as its own process against the simulated provider, with two teams' tokens. The SDK's
client fetches the agent card from the well-known path (no token needed), then sends one message —
the task as text, 20 items and 4 agents as a data part — over the JSON-RPC binding with streaming: the
task goes submitted → working → completed, and its artifacts hold the run's real figures, the same as
``/v1/runs/{id}`` reports. Without the bearer token the call is refused; another team's token does not
find the task; a malformed request gets a JSON-RPC error, never a 5xx.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

if os.environ.get("FLEET_REQUIRE_INTEGRATIONS") != "1":  # CI installs the a2a extra and sets it
    pytest.importorskip("a2a")

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError
from a2a.helpers import get_data_parts, new_data_part
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, PROTOCOL_VERSION_CURRENT, VERSION_HEADER
from a2a.utils.errors import TaskNotFoundError
from aiohttp import web

from agent_fleet.integrations import a2a as fleet_a2a
from agent_fleet.sim.provider import SimConfig, sim_provider_process
from agent_fleet.testing.serve_process import serve_process

KEY = "sk-a2a-test-" + "5d2e" * 5
TOKEN_A = "team-a-" + "71c3e9" * 5
TOKEN_B = "team-b-" + "a04d6f" * 5
ADMIN = "admin-" + "e8f1a2" * 5
FLEET_YAML = """
teams:
  alpha: {token_env: ALPHA_TOKEN}
  beta: {token_env: BETA_TOKEN}
"""
ITEMS = [f"ticket {i}: the {w}-{i} page crashes on save" for i, w in enumerate(["billing", "search", "export"] * 7)][
    :20
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``agent-fleet serve --port 0`` against the simulated provider; yields its URL."""
    cwd = tmp_path_factory.mktemp("a2a")
    (cwd / "fleet.yaml").write_text(FLEET_YAML)
    with sim_provider_process(SimConfig(latency=0.01)) as provider:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "OPENAI_", "ANTHROPIC_"))}
        env.update(
            FLEET_BASE_URL=provider,
            FLEET_API_KEY=KEY,
            ALPHA_TOKEN=TOKEN_A,
            BETA_TOKEN=TOKEN_B,
            FLEET_ADMIN_TOKEN=ADMIN,
        )
        with serve_process(cwd, env, store=f"sqlite:///{cwd / 'fleet.db'}") as server:
            yield server.url
        assert KEY not in server.stderr and TOKEN_A not in server.stderr and TOKEN_B not in server.stderr


@contextlib.asynccontextmanager
async def http(token: str | None) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=60, trust_env=False) as client:
        yield client


def fleet_message(text: str, data: dict[str, Any]) -> SendMessageRequest:
    message = Message(
        role=Role.ROLE_USER,
        message_id=str(uuid.uuid4()),
        parts=[Part(text=text), new_data_part(data)],
    )
    return SendMessageRequest(message=message)


def _state(event: StreamResponse) -> int | None:
    if event.HasField("task"):
        return event.task.status.state
    if event.HasField("status_update"):
        return event.status_update.status.state
    return None


def _artifact(task: Task, name: str) -> dict[str, Any]:
    (artifact,) = [a for a in task.artifacts if a.name == name]
    (data,) = get_data_parts(artifact.parts)
    assert isinstance(data, dict)
    return data


async def test_card_then_one_task_runs_a_fleet_run_to_completion(served: str) -> None:
    # the card: at the SDK's well-known path, no token needed; JSON-RPC, streaming, the bearer scheme
    async with http(None) as anonymous:
        card = await A2ACardResolver(anonymous, served).get_agent_card()
    assert AGENT_CARD_WELL_KNOWN_PATH == "/.well-known/agent-card.json"
    (interface,) = card.supported_interfaces
    assert (interface.url, interface.protocol_binding, interface.protocol_version) == (
        f"{served}/a2a",
        "JSONRPC",
        "1.0",
    )
    assert card.capabilities.streaming
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    assert [s.id for s in card.skills] == ["fleet-run"]

    request = fleet_message(
        "Classify each ticket by product area", {"items": ITEMS, "agents": 4, "embedder": "lexical"}
    )
    async with http(TOKEN_A) as team_a:
        client = await ClientFactory(ClientConfig(httpx_client=team_a)).create_from_url(served)
        states: list[int] = []
        task_id = ""
        async for event in client.send_message(request):
            state = _state(event)
            if state is not None and (not states or states[-1] != state):
                states.append(state)
            task_id = task_id or event.task.id or event.status_update.task_id
        assert states == [TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_COMPLETED]
        task = await client.get_task(GetTaskRequest(id=task_id))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED

        run = _artifact(task, "run")
        results = _artifact(task, "results")
        run_id = run["run_id"]
        assert run["status"] == "completed" and run["team"] == "alpha"
        assert run["summary"]["results_raw"] == len(ITEMS) == 20
        assert run["summary"]["partitions"] == 4
        assert results["final"] and results["total"] == len(results["results"]) == run["summary"]["results_unique"]
        # the same run, as the REST API has it
        rest = await team_a.get(f"{served}/v1/runs/{run_id}")
        assert rest.status_code == 200 and rest.json()["status"] == "completed"
        assert rest.json()["summary"]["results_raw"] == 20
        listed = (await team_a.get(f"{served}/v1/runs")).json()["runs"]
        assert run_id in [r["run_id"] for r in listed]
        rest_results = (await team_a.get(f"{served}/v1/runs/{run_id}/results")).json()
        assert rest_results["total"] == results["total"]
        await client.close()

    # no token: refused before anything runs; another team's token does not find the task
    async with http(None) as anonymous:
        stranger = ClientFactory(ClientConfig(httpx_client=anonymous)).create(card)
        with pytest.raises(A2AClientError, match="401"):
            async for _ in stranger.send_message(fleet_message("Classify each ticket", {"items": ITEMS})):
                pass
    async with http(TOKEN_B) as team_b:
        other = ClientFactory(ClientConfig(httpx_client=team_b)).create(card)
        with pytest.raises(TaskNotFoundError):
            await other.get_task(GetTaskRequest(id=task_id))
        assert (await team_b.get(f"{served}/v1/runs/{run_id}")).status_code == 404


async def _states_of(stream: AsyncIterator[StreamResponse]) -> tuple[str, list[int]]:
    """The task's id and the states its stream went through (each once)."""
    states: list[int] = []
    task_id = ""
    async for event in stream:
        state = _state(event)
        if state is not None and (not states or states[-1] != state):
            states.append(state)
        task_id = task_id or event.task.id or event.status_update.task_id
    return task_id, states


async def test_a_budget_pause_asks_for_input_and_a_reply_raises_it(served: str) -> None:
    data = {"items": ITEMS[:8], "agents": 2, "budget_tokens": 300, "embedder": "lexical"}
    async with http(TOKEN_A) as team_a:
        client = await ClientFactory(ClientConfig(httpx_client=team_a)).create_from_url(served)
        task_id, states = await _states_of(client.send_message(fleet_message("Classify each ticket", data)))
        assert states[-1] == TaskState.TASK_STATE_INPUT_REQUIRED, states
        task = await client.get_task(GetTaskRequest(id=task_id))
        assert "budget" in task.status.message.parts[0].text
        run_id = _artifact(task, "run")["run_id"]
        reply = fleet_message("raise it", {"budget_tokens": 1_000_000})
        reply.message.task_id, reply.message.context_id = task.id, task.context_id
        _, states = await _states_of(client.send_message(reply))
        assert states[-1] == TaskState.TASK_STATE_COMPLETED, states
        task = await client.get_task(GetTaskRequest(id=task_id))
        run = _artifact(task, "run")
        assert run["run_id"] == run_id and run["status"] == "completed"
        assert run["summary"]["results_raw"] == 8
        await client.close()


async def test_cancel_stops_the_run(served: str) -> None:
    items = [f"ticket {i}: the page {i} crashes" for i in range(400)]
    async with http(TOKEN_A) as team_a:
        client = await ClientFactory(ClientConfig(httpx_client=team_a)).create_from_url(served)
        stream = client.send_message(fleet_message("Classify each ticket", {"items": items, "agents": 2}))
        task_id = ""
        async for event in stream:
            if _state(event) == TaskState.TASK_STATE_WORKING:
                task_id = event.status_update.task_id
                break
        await stream.aclose()
        cancelled = await client.cancel_task(CancelTaskRequest(id=task_id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        run_id = client_run_id(cancelled)
        for _ in range(100):
            body = (await team_a.get(f"{served}/v1/runs/{run_id}")).json()
            if body["status"] != "running":
                break
            await asyncio.sleep(0.1)
        assert body["status"] == "interrupted"  # stopped, resumable
        task = await client.get_task(GetTaskRequest(id=task_id))
        assert task.status.state == TaskState.TASK_STATE_CANCELED
        await client.close()


def client_run_id(task: Task) -> str:
    """The run's id, from the status message of the task's working state (kept in its history)."""
    for message in [*task.history, task.status.message]:
        if "run_id" in message.metadata:
            return str(message.metadata["run_id"])
    raise AssertionError(task)


async def test_a_bad_request_gets_a_json_rpc_error_not_a_5xx(served: str) -> None:
    headers = {VERSION_HEADER: PROTOCOL_VERSION_CURRENT}
    cases: list[tuple[bytes | dict[str, Any], int]] = [
        (b"{not json", -32700),
        ({"jsonrpc": "1.0", "id": 1, "method": "SendMessage", "params": {}}, -32600),
        ({"jsonrpc": "2.0", "id": 2, "method": "message/teleport", "params": {}}, -32601),
        ({"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": {"message": "not a message"}}, -32602),
        ({"jsonrpc": "2.0", "id": 4, "method": "GetTask", "params": {"id": "no-such-task"}}, -32001),
    ]
    async with http(TOKEN_A) as team_a:
        for body, code in cases:
            if isinstance(body, bytes):
                r = await team_a.post(f"{served}/a2a", content=body, headers=headers)
            else:
                r = await team_a.post(f"{served}/a2a", json=body, headers=headers)
            assert r.status_code == 200, (body, r.status_code, r.text)
            answer = r.json()
            assert answer["jsonrpc"] == "2.0" and answer["error"]["code"] == code, (body, answer)
            if isinstance(body, dict):
                assert answer["id"] == body["id"]
        # a task that is no valid run: the task is rejected, with the reason
        r = await team_a.post(
            f"{served}/a2a",
            headers=headers,
            json={
                "jsonrpc": "2.0",
                "id": 5,
                "method": "SendMessage",
                "params": {
                    "message": {
                        "role": "ROLE_USER",
                        "messageId": "m-1",
                        "parts": [{"text": "Classify"}, {"data": {"items": ["a"], "agents": 0}}],
                    }
                },
            },
        )
        assert r.status_code == 200
        task = r.json()["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_REJECTED"
        assert "agents" in task["status"]["message"]["parts"][0]["text"]
    async with http(None) as anonymous:
        r = await anonymous.post(f"{served}/a2a", json=cases[-1][0], headers=headers)
        assert r.status_code == 401


def test_without_the_sdk_serve_has_no_a2a_routes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fleet_a2a, "available", lambda: False)
    app = web.Application()
    assert fleet_a2a.mount(app, None) is False  # type: ignore[arg-type]
    assert not list(app.router.routes())
