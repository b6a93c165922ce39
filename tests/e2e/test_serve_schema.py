"""schemathesis against a live ``agent-fleet serve``'s ``/openapi.json``, with each team's token and the
admin's: whatever the request, no 5xx, every error is the one JSON shape the document declares
(``{"error": {"type", "message"}}``), and no answer to one team carries another team's data — neither its
runs' ids nor the text of their inputs. Every route asked about another team's run answers 404."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error, response_schema_conformance

from agent_fleet.control import openapi_document

from .test_serve import ADMIN, TOKEN_A, TOKEN_B, TOKEN_C, Served, _wait_ended, provider, serve_process

__all__ = ["provider"]  # the module-scoped simulated provider, shared with test_serve

TEAMS = {"alpha": TOKEN_A, "beta": TOKEN_B, "gamma": TOKEN_C}
MARK = {team: f"{team}-only-8f3c1e" for team in TEAMS}  # text only that team's run was given


class Live(Served):
    runs: dict[str, str]  # team → the id of a run it owns


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, provider: str) -> Iterator[Live]:
    with serve_process(Path(tmp_path_factory.mktemp("serve")), provider) as s:
        served = Live(s.url, s.proc, s.cwd, s.store)
        served.runs = {}
        for team, token in TEAMS.items():
            items = [f"https://{MARK[team]}.example/{i}" for i in range(3)]
            with served.client(token) as c:
                r = c.post("/v1/runs", json={"task": "Summarise each page", "items": items, "agents": 1})
                assert r.status_code == 202, r.text
                served.runs[team] = r.json()["run_id"]
                _wait_ended(c, served.runs[team])
        yield served


# The document the server serves (test_document_is_served checks they are the same).
schema = schemathesis.openapi.from_dict(openapi_document())


def test_document_is_served(live: Live) -> None:
    with live.client(None) as client:
        assert client.get("/openapi.json").json() == openapi_document()


def _one_shape(response: Any) -> None:
    if response.status_code >= 400:
        body = response.json()
        assert set(body) == {"error"}, body
        assert set(body["error"]) == {"type", "message"}, body
        assert "Traceback" not in response.text


def _only_its_own(live: Live, team: str, text: str) -> None:
    for other in TEAMS:
        if other != team:
            assert live.runs[other] not in text, (team, other, text[:500])
            assert MARK[other] not in text, (team, other, text[:500])


@schema.parametrize()
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_holds_its_contract(case: Any, live: Live) -> None:
    callers: list[tuple[str | None, str | None]] = [(None, ADMIN), *TEAMS.items(), (None, None)]
    for team, token in callers:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        response = case.call(base_url=live.url, headers=headers)
        case.validate_response(response, checks=(not_a_server_error, response_schema_conformance))
        _one_shape(response)
        if team is not None:
            _only_its_own(live, team, response.text)


def test_another_teams_run_is_not_found_on_any_route(live: Live) -> None:
    routes = [("GET", ""), ("GET", "/events"), ("GET", "/results"), ("GET", "/changes")]
    routes += [("POST", "/cancel"), ("POST", "/resume")]
    for team, token in TEAMS.items():
        with live.client(token) as c:
            for other, run_id in live.runs.items():
                if other == team:
                    continue
                for method, tail in routes:
                    r = c.request(method, f"/v1/runs/{run_id}{tail}")
                    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found", (team, tail, r.text)
                r = c.post(f"/v1/runs/{run_id}/budget", json={"tokens": 1000})
                assert r.status_code == 404
            for path in ("/v1/runs", "/v1/teams", "/v1/queues", f"/v1/runs/{live.runs[team]}"):
                r = c.get(path)
                assert r.status_code == 200, r.text
                _only_its_own(live, team, r.text)
            assert [t["team"] for t in c.get("/v1/teams").json()["teams"]] == [team]
