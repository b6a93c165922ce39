"""What a CLI agent finds in its home before it starts: the configuration that points it at the gateway.

Claude Code and aider take the gateway from the environment (``ANTHROPIC_BASE_URL``,
``OPENAI_BASE_URL``). Codex CLI reads its model provider only from ``$CODEX_HOME/config.toml``
(``~/.codex``, and the session's workspace is its home), so a ``codex`` session gets one there:

* ``model_provider = "fleet"``: a custom provider with ``wire_api = "responses"`` (``POST
  /v1/responses``), ``base_url`` the gateway, ``env_key = "OPENAI_API_KEY"`` (the session's gateway
  token, never written to the file) and ``request_max_retries = 0`` — the gateway retries the
  provider itself, so a failing call is not multiplied by the client's own retries;
* ``approval_policy = "never"`` and ``sandbox_mode = "danger-full-access"``: nobody is there to
  approve, and the session's sandbox is the boundary (Codex's own would need namespaces inside it);
* no update check, analytics, feedback or prompt history, and no hosted web search.

Anything the command passes with ``-c key=value`` (or ``-m``) overrides the file. The file is written
again on every attempt, since the gateway's address is the run's; it is not part of what a resume keeps.
"""

from __future__ import annotations

import json

__all__ = ["CODEX_CONFIG", "setup_files"]

CODEX_CONFIG = ".codex/config.toml"
_PROVIDER = "fleet"


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a TOML basic string


def codex_config(base_url: str) -> str:
    """Codex CLI's ``config.toml`` for a session whose gateway is at ``base_url`` (``…/v1``)."""
    return "\n".join(
        [
            "# Written by agent-fleet for this session: the run's gateway is the only model provider.",
            f"model_provider = {_toml_string(_PROVIDER)}",
            'approval_policy = "never"',
            'sandbox_mode = "danger-full-access"',
            "check_for_update_on_startup = false",
            'web_search = "disabled"',
            "",
            "[analytics]",
            "enabled = false",
            "",
            "[feedback]",
            "enabled = false",
            "",
            "[history]",
            'persistence = "none"',
            "",
            f"[model_providers.{_PROVIDER}]",
            'name = "agent-fleet gateway"',
            f"base_url = {_toml_string(base_url.rstrip('/'))}",
            'env_key = "OPENAI_API_KEY"',
            'wire_api = "responses"',
            "request_max_retries = 0",
            "",
        ]
    )


def setup_files(fmt: str, *, openai_base_url: str) -> dict[str, str]:
    """Files (relative to the CLI's home) ``fmt``'s tool needs before it starts, by path."""
    if fmt == "codex":
        return {CODEX_CONFIG: codex_config(openai_base_url)}
    return {}
