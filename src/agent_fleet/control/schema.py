"""The REST API's request models and its OpenAPI document, built from them.

The pydantic models are the source: the server validates every body with them and ``/openapi.json``
carries their JSON Schemas. Every error is ``{"error": {"type", "message"}}`` (:data:`ERROR_SCHEMA`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent_fleet.control.inputs import MAX_ITEMS
from agent_fleet.errors import UsageError
from agent_fleet.options import DEFAULT_MODEL, RunOptions

__all__ = ["ERROR_SCHEMA", "BudgetRaise", "RunCreate", "openapi_document"]


_MAX_AGENTS = 100_000


class RunCreate(BaseModel):
    """A run, as ``deploy``'s options give it. The server's fleet.yaml, provider, output directory
    and worker commands apply; ``input_path`` (relative: to the server's working directory) must lie in
    the caller's input folders, or ``items`` (a list: strings one per line, anything else one JSON record
    per line) are written by the server as the run's input. Values are checked by the one check
    ``deploy`` runs, so a refusal says what ``deploy`` would."""

    model_config = ConfigDict(extra="forbid")

    task: str
    input_path: str | None = Field(default=None, min_length=1)
    items: list[Any] | None = Field(default=None, min_length=1, max_length=MAX_ITEMS)
    agents: int = Field(default=10, json_schema_extra={"minimum": 1, "maximum": _MAX_AGENTS})
    budget_tokens: int | None = Field(default=None, json_schema_extra={"minimum": 1})
    budget_usd: str | None = Field(default=None, examples=["0.50"])
    timeout: float | None = Field(default=None, json_schema_extra={"exclusiveMinimum": 0})
    model: str = Field(default=DEFAULT_MODEL, min_length=1)
    queue: str | None = Field(default=None, min_length=1)
    priority: str | None = Field(default=None, min_length=1)
    requests: dict[str, str] | None = Field(default=None, examples=[{"cpu": "2", "memory": "1Gi"}])
    max_turns: int = Field(default=0, json_schema_extra={"minimum": 0})
    # None: fleet.yaml's models[].max_tokens, else 4096
    max_tokens: int | None = Field(default=None, json_schema_extra={"minimum": 1})
    temperature: float | None = Field(default=None, json_schema_extra={"minimum": 0, "maximum": 2})
    seed: int | None = None
    max_attempts: int = Field(default=3, ge=1, le=100)
    embedder: str = Field(default="auto", examples=["auto", "lexical", "minilm", "fast", "provider"])
    embedding_model: str | None = Field(default=None, min_length=1)
    dedup_scope: str | None = Field(default=None, examples=["auto", "global", "item", "none"])
    dedup_threshold: float | None = Field(default=None, json_schema_extra={"exclusiveMinimum": 0, "maximum": 1})

    def options(self, team: str | None = None) -> RunOptions:
        """``deploy``'s options (UsageError with ``deploy``'s words for a bad value); ``items`` aside."""
        data = self.model_dump(exclude={"items"})
        if data["budget_usd"] is not None:
            data["budget_usd"] = data["budget_usd"].strip().lstrip("$")
        if data["agents"] > _MAX_AGENTS:
            raise UsageError(f"--agents must be at most {_MAX_AGENTS} on a server, got {data['agents']}")
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
            "/v1/runs/{run_id}/changes": {
                "get": _op("The code changes the run's sessions made, and whether each was merged", params=run)
            },
            "/v1/runs/{run_id}/budget": {
                "post": _op("Raise the run's or a session's caps", body="BudgetRaise", params=run)
            },
            "/v1/runs/{run_id}/cancel": {"post": _op("Stop a live run (resumable)", ok=202, params=run)},
            "/v1/runs/{run_id}/resume": {"post": _op("Continue a run from its log", ok=202, params=run)},
            "/v1/queues": {"get": _op("Admission: the caller's ClusterQueues, admitted and pending")},
            "/v1/teams": {"get": _op("The caller's team (the admin: every team): its budget and what it spent")},
        },
    }
