"""What a run was asked to do (stored in its log, never a credential), and what it returns."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from agent_fleet.config import DEFAULT_SESSION_TOKENS, FleetConfig, check_executor
from agent_fleet.domain.results import ResultItem
from agent_fleet.errors import UsageError

__all__ = ["RunOptions", "RunReport", "budget_event_data", "exit_code_for", "session_tokens", "with_config"]


def session_tokens(options: RunOptions) -> int:
    """The run's session token cap: its own, else the default (fleet.yaml's is filled in by ``with_config``)."""
    return options.budget_tokens if options.budget_tokens is not None else DEFAULT_SESSION_TOKENS


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    """What a run was asked to do; stored in the run's log (never a credential)."""

    task: str
    input_path: str | None = None
    agents: int = 10
    budget_tokens: int | None = None  # None: fleet.yaml's, else 128,000
    budget_usd: str | None = None  # Decimal as text
    fleet_budget_usd: str | None = None
    timeout: float | None = None
    model: str = "gpt-4.1-mini"
    provider: str | None = None  # URL | "openai" | "anthropic"
    out_dir: str | None = None
    queue: str | None = None
    priority: str | None = None
    max_concurrency: int = 0  # 0: fleet.yaml's rate_limit.baseline_concurrency (50)
    max_turns: int = 0  # 0: fleet.yaml's guards.max_turns (60)
    max_tokens: int = 4096  # per model call
    max_attempts: int = 3
    agent_cmd: str | None = None
    agent_format: str = "jsonl"  # how a CLI agent's stdout is read: jsonl | claude | codex | aider
    config_path: str | None = None
    embedder: str = "auto"  # auto | lexical | minilm | provider (through the gateway)
    embedding_model: str | None = None  # with the provider embedder; None: text-embedding-3-small
    team: str | None = None  # the fleet.yaml team that submitted it to `agent-fleet serve` (never its token)
    executor: str | None = None  # local | ray:auto | ray://HOST:PORT; None: fleet.yaml's dispatch.executor

    def __post_init__(self) -> None:
        if not self.task.strip():
            raise UsageError("--task must not be empty")
        if self.agents < 1:
            raise UsageError(f"--agents must be at least 1, got {self.agents}")
        if self.budget_tokens is not None and self.budget_tokens < 1:
            raise UsageError(f"--budget-tokens must be positive, got {self.budget_tokens}")
        if self.max_concurrency < 0:
            raise UsageError(f"--max-concurrency must be at least 1, got {self.max_concurrency}")
        if self.max_turns < 0:
            raise UsageError(f"--max-turns must be at least 1, got {self.max_turns}")
        if self.timeout is not None and self.timeout <= 0:
            raise UsageError(f"--timeout must be positive, got {self.timeout}")
        if self.executor is not None:
            try:
                check_executor(self.executor)
            except ValueError as exc:
                raise UsageError(f"--executor: {exc}") from None
        for name in ("budget_usd", "fleet_budget_usd"):
            value = getattr(self, name)
            if value is not None:
                try:
                    if Decimal(value) <= 0:
                        raise ValueError
                except (ArithmeticError, ValueError):
                    raise UsageError(f"--{name.replace('_', '-')} must be a positive number, got {value!r}") from None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunOptions:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True, slots=True)
class RunReport:
    run_id: str
    summary: dict[str, Any]
    results: tuple[ResultItem, ...]
    out_dir: Path

    @property
    def status(self) -> str:
        return str(self.summary["status"])


def exit_code_for(status: str) -> int:
    """SPEC.md exit codes for a run's final status."""
    return {"completed": 0, "partial": 1, "failed": 1, "paused": 3, "interrupted": 130}.get(status, 1)


def with_config(options: RunOptions, config: FleetConfig) -> RunOptions:
    """Fill what the command line left unset from fleet.yaml (flags win over the file)."""
    budgets = config.budgets
    return replace(
        options,
        budget_tokens=options.budget_tokens if options.budget_tokens is not None else budgets.session_tokens,
        budget_usd=options.budget_usd if options.budget_usd is not None else _text(budgets.session_usd),
        fleet_budget_usd=options.fleet_budget_usd if options.fleet_budget_usd is not None else _text(budgets.fleet_usd),
        max_concurrency=options.max_concurrency or config.rate_limit.baseline_concurrency,
        max_turns=options.max_turns or config.guards.max_turns,
        executor=options.executor or config.dispatch.executor,
    )


def _text(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


def budget_event_data(tokens: int | None, usd: str | None) -> dict[str, Any]:
    """The data of a ``budget_raised`` event (the new caps), checked: a whole number of tokens ≥ 1, dollars > 0."""
    if tokens is None and usd is None:
        raise UsageError("give --tokens N or --usd X")
    data: dict[str, Any] = {}
    if tokens is not None:
        if tokens < 1:
            raise UsageError(f"--tokens must be at least 1, not {tokens}")
        data["tokens"] = tokens
    if usd is not None:
        try:
            value = Decimal(usd.strip().lstrip("$"))
        except InvalidOperation:
            raise UsageError(f"--usd must be a number of dollars, not {usd!r}") from None
        if not value.is_finite() or value <= 0:
            raise UsageError(f"--usd must be more than 0, not {usd}")
        data["usd"] = str(value)  # dollars stay exact: Decimal text, never a float
    return data
