"""What a run was asked to do (stored in its log, never a credential), and what it returns."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from agent_fleet.config import DEDUP_SCOPES, DEFAULT_SESSION_TOKENS, FleetConfig, check_executor
from agent_fleet.domain.calls import CallShape
from agent_fleet.domain.results import ResultItem
from agent_fleet.errors import UsageError

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_MODEL",
    "RunOptions",
    "RunReport",
    "budget_event_data",
    "call_shape",
    "exit_code_for",
    "parse_requests",
    "session_tokens",
    "with_config",
]

DEFAULT_MODEL = "gpt-4.1-mini"  # --model when none is given (with fleet.yaml models: the router picks)
DEFAULT_MAX_TOKENS = 4096  # an agent call's output limit when neither the run nor fleet.yaml sets one


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
    model: str = DEFAULT_MODEL
    provider: str | None = None  # URL | "openai" | "anthropic"
    out_dir: str | None = None
    queue: str | None = None
    priority: str | None = None
    max_concurrency: int = 0  # 0: fleet.yaml's rate_limit.baseline_concurrency (50)
    max_turns: int = 0  # 0: fleet.yaml's guards.max_turns (60)
    max_tokens: int | None = None  # per model call; None: fleet.yaml's models[].max_tokens, else 4096
    temperature: float | None = None  # sent on every agent call when set (else fleet.yaml's, else the server's)
    seed: int | None = None  # likewise
    max_attempts: int = 3
    agent_cmd: str | None = None
    agent_format: str = "jsonl"  # how a CLI agent's stdout is read: jsonl | claude | codex | aider
    config_path: str | None = None
    embedder: str = "auto"  # auto | minilm | fast (int8) | lexical | provider (through the gateway)
    embedding_model: str | None = None  # with the provider embedder; None: text-embedding-3-small
    team: str | None = None  # the fleet.yaml team that submitted it to `agent-fleet serve` (never its token)
    executor: str | None = None  # local | ray:auto | ray://HOST:PORT; None: fleet.yaml's dispatch.executor
    # each session's requests for admission, over pods 1 and fleet.yaml hands.cpu / hands.memory (Kueue
    # quantities as text, e.g. {"cpu": "2", "memory": "1Gi", "example.com/gpu": "1"})
    requests: dict[str, str] | None = None
    check: str | None = None  # a shell command run per change (--check); None: fleet.yaml's changes.check
    push: str | None = None  # a git remote (name or URL) the run's branches are pushed to (--push)
    input_url: str | None = None  # the git remote (https://HOST/PATH.git[#REF]) the input was cloned from
    dedup_scope: str | None = None  # auto | global | item | none; None: fleet.yaml's aggregate.dedup_scope
    dedup_threshold: float | None = None  # cosine in (0, 1]; None: fleet.yaml's, else the embedder's own

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
        if self.timeout is not None and not (math.isfinite(self.timeout) and self.timeout > 0):
            raise UsageError(f"--timeout must be a positive number of seconds, got {self.timeout}")
        if self.check is not None and not self.check.strip():
            raise UsageError("--check must be a shell command, not empty")
        if self.push is not None and not self.push.strip():
            raise UsageError("--push must name a git remote")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise UsageError(f"--max-tokens must be at least 1, got {self.max_tokens}")
        if self.temperature is not None and not 0 <= self.temperature <= 2:
            raise UsageError(f"--temperature must be between 0 and 2, got {self.temperature}")
        if self.executor is not None:
            try:
                check_executor(self.executor)
            except ValueError as exc:
                raise UsageError(f"--executor: {exc}") from None
        if self.requests is not None and not _pairs(self.requests):
            raise UsageError("--requests must be NAME=QUANTITY pairs, e.g. cpu=2,memory=1Gi")
        if self.dedup_scope is not None and self.dedup_scope not in DEDUP_SCOPES:
            choose = ", ".join(DEDUP_SCOPES)
            raise UsageError(f"--dedup-scope: unknown scope {self.dedup_scope!r} (choose from {choose})")
        if self.dedup_threshold is not None:
            t = self.dedup_threshold
            if isinstance(t, bool) or not isinstance(t, int | float) or not 0.0 < t <= 1.0:  # NaN fails too
                raise UsageError(f"--dedup-threshold must be in (0, 1], got {t}")
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
    # with --push: {remote, branches: [names pushed], error: one line | None}; never a credential
    push: dict[str, Any] | None = None

    @property
    def status(self) -> str:
        return str(self.summary["status"])


def call_shape(options: RunOptions, config: FleetConfig, model: str) -> CallShape:
    """What a run sends on the calls of ``model``: its flags over fleet.yaml's entry for the model."""
    entry = config.model(model)
    flags = CallShape(max_tokens=options.max_tokens, temperature=options.temperature, seed=options.seed)
    return flags.over(CallShape.of(entry) if entry is not None else None)


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
        check=options.check if options.check is not None else config.changes.check,
    )


def _text(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


def _pairs(value: object) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and k.strip() and isinstance(v, str) and v.strip() for k, v in value.items()
    )


def parse_requests(text: str | None) -> dict[str, str] | None:
    """``--requests cpu=2,memory=1Gi,NAME=N`` as a mapping (UsageError when malformed; the quantities
    themselves are checked with the run's queues)."""
    if text is None or not text.strip():
        return None
    out: dict[str, str] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            raise UsageError(f"--requests: {part.strip()!r} is not NAME=QUANTITY (e.g. cpu=2,memory=1Gi)")
        if name in out:
            raise UsageError(f"--requests: {name} is given twice")
        out[name] = value
    return out


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
