"""schemathesis against a live ``agent-fleet serve``'s ``/openapi.json``: whatever the request, no 5xx,
and every error is the one JSON shape the document declares (``{"error": {"type", "message"}}``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error, response_schema_conformance

from agent_fleet.control import openapi_document

from .test_serve import ADMIN, Served, provider, serve_process

__all__ = ["provider"]  # the module-scoped simulated provider, shared with test_serve


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, provider: str) -> Iterator[Served]:
    with serve_process(Path(tmp_path_factory.mktemp("serve")), provider) as s:
        yield s


# The document the server serves (test_document_is_served checks they are the same).
schema = schemathesis.openapi.from_dict(openapi_document())


def test_document_is_served(live: Served) -> None:
    with live.client(None) as client:
        assert client.get("/openapi.json").json() == openapi_document()


def _one_shape(response: Any) -> None:
    if response.status_code >= 400:
        body = response.json()
        assert set(body) == {"error"}, body
        assert set(body["error"]) == {"type", "message"}, body
        assert "Traceback" not in response.text


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_holds_its_contract(case: Any, live: Served) -> None:
    for headers in ({"Authorization": f"Bearer {ADMIN}"}, {}):
        response = case.call(base_url=live.url, headers=headers)
        case.validate_response(response, checks=(not_a_server_error, response_schema_conformance))
        _one_shape(response)
