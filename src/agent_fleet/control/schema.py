"""The REST API's request models and its OpenAPI document, built from them.

The pydantic models are the source: the server validates every body with them and ``/openapi.json``
carries their JSON Schemas. Every error is ``{"error": {"type", "message"}}`` (:data:`ERROR_SCHEMA`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_fleet.options import RunOptions

__all__ = ["ERROR_SCHEMA", "BudgetRaise", "RunCreate", "openapi_document"]


class RunCreate(BaseModel):
    """A run, as ``deploy``'s options give it. The server's fleet.yaml, provider, output directory
    and worker commands apply; ``input_path`` is under the server's working directory."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(min_length=1, pattern=r"\S")
    input_path: str | None = Field(default=None, min_length=1)
    agents: int = Field(default=10, ge=1, le=100_000)
    budget_tokens: int | None = Field(default=None, ge=1)
    budget_usd: str | None = Field(default=None, pattern=r"^\$?[0-9]+(\.[0-9]+)?$")
    timeout: float | None = Field(default=None, gt=0, le=86_400 * 7)
    model: str = Field(default="gpt-4.1-mini", min_length=1)
    queue: str | None = Field(default=None, min_length=1)
    priority: str | None = Field(default=None, min_length=1)
    max_turns: int = Field(default=0, ge=0)
    max_tokens: int = Field(default=4096, ge=1)
    max_attempts: int = Field(default=3, ge=1, le=100)
    embedder: Literal["auto", "lexical", "minilm", "provider"] = "auto"
    embedding_model: str | None = Field(default=None, min_length=1)

    def options(self, team: str | None) -> RunOptions:
        data = self.model_dump()
        if data["budget_usd"] is not None:
            data["budget_usd"] = data["budget_usd"].lstrip("$")
        return RunOptions(**data, team=team)


class BudgetRaise(BaseModel):
    """New caps (``budget raise``): for the run (every session) or for one of its sessions."""

    model_config = ConfigDict(extra="forbid")

    tokens: int | None = Field(default=None, ge=1)
    usd: str | None = Field(default=None, pattern=r"^\$?[0-9]+(\.[0-9]+)?$")
    session_id: str | None = Field(default=None, min_length=1)


ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "additionalProperties": False,
    "properties": {
        "error": {
            "type": "object",
            "required": ["type", "message"],
            "additionalProperties": False,
            "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
        }
    },
}

_OBJECT = {"type": "object"}
_RUN_ID = {"name": "run_id", "in": "path", "required": True, "schema": {"type": "string"}}


def _query(name: str, minimum: int = 0) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": {"type": "integer", "minimum": minimum}}


def _op(summary: str, ok: int = 200, body: str | None = None, params: list[dict[str, Any]] | None = None) -> Any:
    op: dict[str, Any] = {
        "summary": summary,
        "parameters": params or [],
        "responses": {
            str(ok): {"description": "OK", "content": {"application/json": {"schema": _OBJECT}}},
            "default": {
                "description": "An error",
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
            },
        },
    }
    if body is not None:
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{body}"}}},
        }
    return op


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``/v1/``."""
    schemas: dict[str, Any] = {"Error": ERROR_SCHEMA}
    for model in (RunCreate, BudgetRaise):
        schemas[model.__name__] = model.model_json_schema(ref_template="#/components/schemas/{model}")
    run = [_RUN_ID]
    return {
        "openapi": "3.1.0",
        "info": {"title": "Agent Fleet Manager", "version": "1"},
        "security": [{"bearer": []}],
        "components": {"schemas": schemas, "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "paths": {
            "/v1/runs": {
                "get": _op("The runs the caller may see, newest first"),
                "post": _op("Start a run; returns its id at once", ok=202, body="RunCreate"),
            },
            "/v1/runs/{run_id}": {"get": _op("A run's status, figures and (once ended) summary", params=run)},
            "/v1/runs/{run_id}/events": {
                "get": _op(
                    "Events of the run's stream or of one of its sessions",
                    params=[
                        *run,
                        {"name": "session", "in": "query", "required": False, "schema": {"type": "string"}},
                        _query("after"),
                        _query("limit", 1),
                    ],
                )
            },
            "/v1/runs/{run_id}/results": {
                "get": _op(
                    "The run's results (unique once it ended)", params=[*run, _query("offset"), _query("limit", 1)]
                )
            },
            "/v1/runs/{run_id}/budget": {
                "post": _op("Raise the run's or a session's caps", body="BudgetRaise", params=run)
            },
            "/v1/runs/{run_id}/cancel": {"post": _op("Stop a live run (resumable)", ok=202, params=run)},
            "/v1/runs/{run_id}/resume": {"post": _op("Continue a run from its log", ok=202, params=run)},
            "/v1/queues": {"get": _op("Admission: the caller's ClusterQueues, admitted and pending")},
        },
    }
