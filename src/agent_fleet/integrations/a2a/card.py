"""The agent card ``serve`` publishes at ``/.well-known/agent-card.json`` (A2A 1.0, a2a-sdk's types)."""

from __future__ import annotations

from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_1_0, TransportProtocol

from agent_fleet import __version__

__all__ = ["RPC_PATH", "SECURITY_SCHEME", "agent_card"]

RPC_PATH = "/a2a"  # the JSON-RPC endpoint: POST, the same bearer token as /v1/
SECURITY_SCHEME = "bearer"

_INPUT_MODES = ["text/plain", "application/json"]
_OUTPUT_MODES = ["application/json", "text/plain"]

_SKILL_DESCRIPTION = (
    "Runs a task over many items as one fleet run: the message's text is the task; a data part (a JSON "
    'object) may carry "items" (a list, one item each) or "input_path" (a file or directory on the server), '
    'and run options such as "agents", "budget_tokens", "budget_usd", "model", "queue". The task ends with '
    "the run: its summary and its deduplicated results come back as artifacts. A run paused on its budget "
    'asks for input: reply on the task with {"budget_tokens": N} or {"budget_usd": "X"} to raise it and go on.'
)


def agent_card(base_url: str, *, bearer: bool) -> AgentCard:
    """The card, its JSON-RPC interface under ``base_url`` (scheme and host the caller reached us at).
    ``bearer``: teams' tokens are configured, and every call needs one."""
    card = AgentCard(
        name="Agent Fleet Manager",
        description=(
            "Runs hundreds to tens of thousands of LLM agents as one fleet: decomposes a task over its "
            "input, runs it within budgets and rate limits, and aggregates the results."
        ),
        version=__version__,
        supported_interfaces=[
            AgentInterface(
                url=base_url.rstrip("/") + RPC_PATH,
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=PROTOCOL_VERSION_1_0,
            )
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False, extended_agent_card=False),
        default_input_modes=_INPUT_MODES,
        default_output_modes=_OUTPUT_MODES,
        skills=[
            AgentSkill(
                id="fleet-run",
                name="Run a fleet",
                description=_SKILL_DESCRIPTION,
                tags=["fleet", "batch", "parallel", "map-reduce"],
                examples=[
                    "Classify each support ticket by product area",
                    "Summarise each of these pages: https://example.com/a https://example.com/b",
                ],
                input_modes=_INPUT_MODES,
                output_modes=_OUTPUT_MODES,
            )
        ],
    )
    if bearer:
        card.security_schemes[SECURITY_SCHEME].CopyFrom(
            SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer", description="A team's token of the server's fleet.yaml, or the admin's"
                )
            )
        )
        card.security_requirements.append(SecurityRequirement(schemes={SECURITY_SCHEME: StringList()}))
    return card
