"""fleet.yaml: the models (routing tiers), budgets, rate limits, queues and price overrides.

```yaml
models:                       # routing tiers: the router picks by difficulty, falls back on failure
  - {name: fast, provider: openai, model: gpt-4.1-mini, base_url: ..., api_key_env: FLEET_API_KEY, tier: simple}
  - {name: deep, provider: anthropic, model: claude-opus-4-5, tier: complex, fallback: [fast]}
routing: {classifier: fast}   # optional: a cheap model call that rates difficulty
budgets: {session_tokens: 128000, session_usd: null, fleet_usd: null, queue_usd: {team-a: 50}, mode: bounded}
aliases: {claude-opus-5-5: deep, "claude-haiku-*": fast}   # what clients ask for -> a models: name or model id
rate_limit: {baseline_concurrency: 50, tokens_per_minute: null}
guards: {max_turns: 60, repeated_tool_calls: 5, no_progress_turns: 12}
context: {care: true, threshold: 0.75, keep_turns: 4, summary_tokens: 512, trim_step: 8}   # + context_window
prices: {my-model: {input: 0.4, output: 1.6, cached_input: 0.1}}   # $/MTok, over the built-in table
queues: kueue.yaml            # or inline Kueue v1beta2 objects (parsed by the admission plane)
mcp_servers:                  # MCP servers shared by the fleet through one client pool
  github: {command: github-mcp, args: [stdio], env: {GITHUB_TOKEN: "${GITHUB_TOKEN}"}}
hands:                        # what sessions work with
  tools: {all: [github__search_code], directory: [run_command]}   # extra toolsets by input kind
  files: direct               # direct | sandbox (file tools read the session's own sandbox)
  sandbox_root: null          # default: agent-fleet-<uid> under the system temp directory
dispatch: {workers: null, hung_after_s: 600, breaker_cooldown_s: 30}
changes: {check: "pytest -q", check_timeout_s: 600}   # a check per change (--check), its wall clock
supervision:                  # what goes to human review, decision-shape alarms, quality-based demotion
  confidence_threshold: 0.5   # results below this confidence
  review_unsure: true         # unsure verdicts too (refuted ones always)
  shape: {z_threshold: 3.5, min_ratio: 2.0, min_sessions: 5, fanout_sessions: 20, trivial_tokens: 2000,
          repeated_calls: 3, pause: false}
  quality: {enabled: true, min_agreement: 0.7, max_malformed_rate: 0.2, max_truncated_rate: 0.2,
            min_calls: 20, min_judged: 5, window_s: 86400, runs: 10}
```

Every model refuses unknown keys, so a typo is an error, not a silent default. :func:`load_config`
turns any problem into one :class:`~agent_fleet.errors.ConfigError` line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agent_fleet.domain.calls import Quirks
from agent_fleet.errors import ConfigError

__all__ = [
    "DEDUP_SCOPES",
    "TIERS",
    "AutoscaleSettings",
    "BudgetsConfig",
    "ChangesConfig",
    "ContextConfig",
    "ProviderConfig",
    "FleetConfig",
    "DispatchConfig",
    "GuardsConfig",
    "HandsConfig",
    "ModelConfig",
    "PriceOverride",
    "RateLimitConfig",
    "RoutingConfig",
    "QualityPolicy",
    "ShapePolicy",
    "SupervisionConfig",
    "TeamConfig",
    "VerificationConfigModel",
    "MAX_YAML_ALIASES",
    "MAX_YAML_BYTES",
    "MAX_YAML_NODES",
    "check_yaml_nodes",
    "load_config",
    "load_yaml",
    "parse_config",
    "read_yaml_file",
]

DEFAULT_SESSION_TOKENS = 128_000  # a session's token cap when neither the run nor fleet.yaml sets one

# Every YAML the engine reads (fleet.yaml, Kueue objects, admission scenarios) goes through
# load_yaml: bounded in bytes, in alias uses, and in nodes once aliases are expanded, so a
# "billion laughs" document fails in milliseconds instead of being walked by the validators.
MAX_YAML_BYTES = 8 * 1024 * 1024
MAX_YAML_ALIASES = 1_000
MAX_YAML_NODES = 500_000


class _BoundedLoader(yaml.SafeLoader):
    """The safe loader, counting alias uses as it composes."""

    aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_YAML_ALIASES:
                raise _TooBig(f"more than {MAX_YAML_ALIASES} aliases")
        return super().compose_node(parent, index)


class _TooBig(Exception):
    pass


def check_yaml_nodes(docs: Sequence[Any], source: str) -> None:
    """Refuse (ConfigError naming ``source``) documents of more than MAX_YAML_NODES nodes, a node
    shared through an alias counted at each use: YAML text is checked by :func:`load_yaml`, objects
    read from it elsewhere by their reader."""
    seen = 0
    stack: list[Any] = list(docs)
    while stack:
        item = stack.pop()
        seen += 1
        if seen > MAX_YAML_NODES:
            raise ConfigError(f"{source}: YAML too large: more than {MAX_YAML_NODES} nodes once aliases are expanded")
        if isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def load_yaml(text: str, *, source: str, all_documents: bool = False) -> Any:
    """The YAML ``text`` (every document with ``all_documents``), within the limits above.
    Raises ConfigError (one line naming ``source``)."""
    if len(text.encode("utf-8", errors="replace")) > MAX_YAML_BYTES:
        raise ConfigError(f"{source}: YAML larger than {MAX_YAML_BYTES} bytes")
    loader = _BoundedLoader(text)
    try:
        docs: list[Any] = []
        while loader.check_data():  # type: ignore[no-untyped-call]
            docs.append(loader.get_data())
            if not all_documents:
                break
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{source}:{where} is not valid YAML ({problem})") from None
    except _TooBig as exc:
        raise ConfigError(f"{source}: YAML refused: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{source}: is not valid YAML (nesting too deep)") from None
    finally:
        loader.dispose()
    check_yaml_nodes(docs, source)
    if all_documents:
        return docs
    return docs[0] if docs else None


def read_yaml_file(path: str | Path, *, what: str = "YAML") -> str:
    """The text of a YAML file, refused (ConfigError) when missing, unreadable or over the size bound."""
    p = Path(path)
    try:
        if p.stat().st_size > MAX_YAML_BYTES:
            raise ConfigError(f"{p}: {what} larger than {MAX_YAML_BYTES} bytes")
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"cannot read {what} {p}: {reason}") from None


Tier = Literal["simple", "medium", "complex"]
TIERS: tuple[str, ...] = ("simple", "medium", "complex")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelConfig(_Strict):
    name: str = Field(min_length=1)
    provider: str = "openai"  # openai | anthropic | an http(s) URL
    model: str = Field(min_length=1)
    base_url: str | None = None
    api_key_env: str | None = None  # the variable holding this model's key (never the key itself)
    tier: Tier = "medium"
    fallback: tuple[str, ...] = ()
    # Sent on every call of the model (and its output limit, if not the published one); the call's shape:
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    seed: int | None = None
    tool_choice: Literal["auto", "required", "none"] | None = None  # None: auto whenever tools are offered
    timeout_s: float | None = Field(default=None, gt=0)  # how long it may stay silent (provider.timeout_s)
    compat: tuple[str, ...] | dict[str, bool] | None = None  # the server's quirks (domain.calls.QUIRKS)
    context_window: int | None = Field(default=None, ge=1024)  # its context window, if not genai-prices'
    # Does the endpoint serve the Responses API itself? None: only api.openai.com is assumed to.
    responses_api: bool | None = None

    @field_validator("compat")
    @classmethod
    def _compat(cls, value: tuple[str, ...] | dict[str, bool] | None) -> tuple[str, ...] | dict[str, bool] | None:
        Quirks.declared(value)  # unknown names: one clear error
        return value

    @field_validator("provider")
    @classmethod
    def _provider(cls, value: str) -> str:
        if value not in ("openai", "anthropic") and not value.startswith(("http://", "https://")):
            raise ValueError("provider is openai, anthropic or an http(s) URL")
        return value


class BudgetsConfig(_Strict):
    """Caps per scope. ``mode: bounded`` (default): a call is admitted while the cap is not reached and
    the call that crosses it finishes (overshoot under one call); ``strict``: a call's ``max_tokens`` is
    lowered to what is left, and below ``strict_floor_tokens`` the session pauses (no overshoot)."""

    session_tokens: int | None = Field(default=DEFAULT_SESSION_TOKENS, ge=1)
    session_usd: Decimal | None = Field(default=None, ge=0)
    fleet_usd: Decimal | None = Field(default=None, ge=0)
    fleet_tokens: int | None = Field(default=None, ge=1)
    queue_usd: dict[str, Decimal] = Field(default_factory=dict)
    model_usd: dict[str, Decimal] = Field(default_factory=dict)
    mode: Literal["bounded", "strict"] = "bounded"
    strict_floor_tokens: int = Field(default=1024, ge=1)


class RateLimitConfig(_Strict):
    baseline_concurrency: int = Field(default=50, ge=1)
    adaptive: bool = True
    window_s: float = Field(default=10.0, gt=0)
    max_error_rate: float = Field(default=0.05, ge=0, le=1)
    max_mean_latency_s: float = Field(default=2.0, gt=0)
    requests_per_minute: float | None = Field(default=None, gt=0)
    tokens_per_minute: float | None = Field(default=None, gt=0)
    max_attempts: int = Field(default=4, ge=1)


class ProviderConfig(_Strict):
    """How long one provider request may take, and how long a run goes on without any success.

    ``give_up_after_s``: when calls fail (anything but a 429) and none succeeds for that long, the run
    stops (exit 4, resumable); refused credentials (401/403) stop it at once."""

    timeout_s: float = Field(default=120.0, gt=0)
    give_up_after_s: float = Field(default=60.0, gt=0)


class RoutingConfig(_Strict):
    classifier: str | None = None  # a model name from `models` to rate difficulty, or none
    default_tier: Tier = "medium"


class GuardsConfig(_Strict):
    max_turns: int = Field(default=60, ge=1)
    repeated_tool_calls: int = Field(default=5, ge=2)
    no_progress_turns: int = Field(default=12, ge=1)


class ContextConfig(_Strict):
    """Context care: when a request nears its model's window, older tool results are trimmed and, if
    that is not enough, older turns are compacted into a summary (one metered model call, recorded).
    ``threshold`` is the share of (window - output limit) a request may fill; the last ``keep_turns``
    turns are always sent whole; a summary may be ``summary_tokens`` long; tool results are trimmed through
    a turn that is a multiple of ``trim_step`` (so several requests share their prefix, for prompt caching)."""

    care: bool = True
    threshold: float = Field(default=0.75, gt=0, le=1)
    keep_turns: int = Field(default=4, ge=1)
    summary_tokens: int = Field(default=512, ge=16)
    trim_step: int = Field(default=8, ge=1)


class PriceOverride(_Strict):
    """US dollars per million tokens."""

    input: Decimal = Field(ge=0)
    output: Decimal = Field(ge=0)
    cached_input: Decimal | None = Field(default=None, ge=0)
    cache_write: Decimal | None = Field(default=None, ge=0)


class HandsConfig(_Strict):
    """Tools and sandboxes. Tool names are built-in (``run_command``, ``fetch_url``, ...), an MCP server
    (all its tools) or ``server__tool``."""

    tools: dict[str, tuple[str, ...]] = Field(default_factory=dict)  # input kind or "all" -> extra tools
    files: Literal["direct", "sandbox"] = "direct"
    sandbox_root: str | None = None
    isolation: Literal["auto", "bwrap", "plain"] = "auto"
    allow_network: bool = False  # for run_command sandboxes (CLI agents always reach the gateway)
    cpu: float = Field(default=1.0, gt=0)  # requested cores per sandbox (limits are twice that)
    memory: str = "512Mi"
    allowed_hosts: tuple[str, ...] | None = None  # fetch_url egress; None: the partition's own hosts

    @field_validator("tools")
    @classmethod
    def _kinds(cls, value: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        known = {"all", "directory", "list", "jsonl", "csv", "none"}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"unknown input kinds {unknown} (known: {', '.join(sorted(known))})")
        return value


class AutoscaleSettings(_Strict):
    """The worker pool grows with the queue (and latency) and shrinks after a lull, within limits."""

    min_workers: int = Field(default=2, ge=0)
    max_workers: int = Field(default=64, ge=1)
    warm: int = Field(default=2, ge=0)  # idle workers kept ready above the demand
    target_load: int = Field(default=1, ge=1)  # sessions per worker
    latency_slo_s: float | None = Field(default=None, gt=0)
    step_up: int = Field(default=4, ge=1)
    step_down: int = Field(default=4, ge=1)
    down_cooldown_s: float = Field(default=60.0, ge=0)

    @model_validator(mode="after")
    def _limits(self) -> AutoscaleSettings:
        if self.min_workers > self.max_workers:
            raise ValueError("min_workers must not exceed max_workers")
        return self


class RaySettings(_Strict):
    """The Ray executor (``dispatch.executor: ray:auto`` or ``ray://HOST:PORT``): what one session asks
    of a node (placement), how many attempts one node worker runs at once, where nodes reach the gateway."""

    num_cpus: float = Field(default=0.01, ge=0)  # per session; a node holds as many sessions as it has room for
    memory: int = Field(default=0, ge=0)  # bytes per session
    resources: dict[str, float] = Field(default_factory=dict)  # custom Ray resources per session
    sessions_per_worker: int = Field(default=2000, ge=1)  # attempts one node worker runs at once
    workers_per_node: int = Field(default=1, ge=1)  # node workers (processes) per node
    gateway_host: str | None = None  # the address nodes reach the gateway service at (default: this node's)
    gateway_port: int = Field(default=0, ge=0, le=65535)  # 0: any free port


def check_executor(value: str) -> str:
    """``local``, ``ray:auto`` or ``ray://HOST:PORT``; ValueError otherwise."""
    value = value.strip()
    if value in ("local", "ray:auto"):
        return value
    host, sep, port = value.removeprefix("ray://").rpartition(":")
    if value.startswith("ray://") and sep and host and port.isdigit() and 0 < int(port) < 65536:
        return value
    raise ValueError(f"executor must be local, ray:auto or ray://HOST:PORT, not {value!r}")


class DispatchConfig(_Strict):
    """The worker pool: how many execution slots, when a worker counts as hung, its breaker."""

    executor: str = "local"  # local (this process) | ray:auto | ray://HOST:PORT (a Ray cluster)
    ray: RaySettings = RaySettings()

    workers: int | None = Field(default=None, ge=1)  # default: one per session plus spares
    check_interval_s: float = Field(default=1.0, gt=0)
    hung_after_s: float = Field(default=600.0, gt=0)  # busy without progress outside model calls
    trip_after: int = Field(default=3, ge=1)  # consecutive failures that take a worker out
    breaker_cooldown_s: float = Field(default=30.0, gt=0)  # before the half-open probe
    max_reassignments: int = Field(default=10, ge=1)  # worker losses a session survives
    autoscale: AutoscaleSettings | None = None  # without it: a fixed pool (`workers`)

    @field_validator("executor")
    @classmethod
    def _executor(cls, value: str) -> str:
        return check_executor(value)


class VerificationConfigModel(_Strict):
    """Cross-fleet verification of a random sample of the unique results."""

    fraction: float = Field(default=0.05, ge=0, le=1)  # share of the unique results to verify
    minimum: int = Field(default=5, ge=0)  # but at least this many; fraction 0 and minimum 0 turn it off
    maximum: int | None = Field(default=200, ge=1)
    threshold: float = Field(default=0.8, ge=0, le=1)  # agreement below this raises the alarm
    model: str | None = None  # a name from `models` or a model id; default: a model of another tier
    seed: int = 0


class ShapePolicy(_Strict):
    """Decision-shape alarms per run: a session far above the run's median, a trivial task fanned out
    to many sessions, the same tool call repeated across sessions."""

    z_threshold: float = Field(default=3.5, gt=0)  # robust z-score (median and MAD) of turns, tool calls, tokens
    min_ratio: float = Field(default=2.0, ge=1)  # and at least this many times the median
    min_sessions: int = Field(default=5, ge=3)  # fewer sessions with activity: no statistic
    fanout_sessions: int = Field(default=20, ge=2)  # this many sessions or more ...
    trivial_tokens: int = Field(default=2000, ge=0)  # ... for an input estimated at most this many tokens
    repeated_calls: int = Field(default=3, ge=2)  # one tool call (name and arguments) in this many sessions
    pause: bool = False  # pause a session as soon as it sits far above the run's median


class QualityPolicy(_Strict):
    """Per model, over the recent runs: below a threshold the router demotes it for new sessions."""

    enabled: bool = True
    min_agreement: float = Field(default=0.7, ge=0, le=1)  # verification agreement on its results
    max_malformed_rate: float = Field(default=0.2, ge=0, le=1)  # share of its tool calls that were malformed
    max_truncated_rate: float = Field(default=0.2, ge=0, le=1)  # share of its answers cut at the output limit
    min_calls: int = Field(default=20, ge=1)  # answers needed before the rates count
    min_judged: int = Field(default=5, ge=1)  # decisive verdicts needed before agreement counts
    window_s: float = Field(default=86_400.0, gt=0)  # how far back the signals reach
    runs: int = Field(default=10, ge=1)  # at most this many recent runs are read


class SupervisionConfig(_Strict):
    """What goes to the exception-based review queue (``agent-fleet review``)."""

    confidence_threshold: float = Field(default=0.5, ge=0, le=1)
    review_unsure: bool = True
    shape: ShapePolicy = ShapePolicy()
    quality: QualityPolicy = QualityPolicy()


class TeamConfig(_Strict):
    """A team of ``agent-fleet serve``: who it is (the variable holding its bearer token, never the
    token itself), the LocalQueues (``namespace/name``) its runs may use, its dollar budget, the folders
    its inputs may come from (relative to fleet.yaml's folder; none: ``inputs/NAME`` under the server's
    working directory)."""

    token_env: str = Field(min_length=1)
    queues: tuple[str, ...] = ()  # empty: every queue
    budget_usd: Decimal | None = Field(default=None, gt=0)
    inputs: tuple[str, ...] = ()

    @field_validator("inputs")
    @classmethod
    def _inputs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not p.strip() for p in value):
            raise ValueError("an input folder must not be empty")
        return value


DEDUP_SCOPES = ("auto", "global", "item", "none")


class AggregateSettings(_Strict):
    """How results are merged (aggregate/merge_scope.py): ``dedup_scope`` auto (identity: results about
    different input items never merge) | global | item | none; ``dedup_threshold``: the cosine at which
    two results say the same thing, in (0, 1] (unset: the embedder's own)."""

    dedup_scope: Literal["auto", "global", "item", "none"] = "auto"
    dedup_threshold: float | None = Field(default=None, gt=0, le=1)


class ChangesConfig(_Strict):
    """What a run keeps of its sessions' code changes (SPEC.md "Changes"): a file over
    ``max_file_bytes`` is refused from its change (with the reason), a change whose patch is over
    ``max_patch_bytes`` as a whole; ``ignore`` (gitignore patterns) adds untracked files that are never
    a session's work to those the repository ignores (compiled Python and tool caches already are)."""

    max_file_bytes: int = Field(default=2 * 1024 * 1024, ge=1)
    max_patch_bytes: int = Field(default=32 * 1024 * 1024, ge=1)
    ignore: tuple[str, ...] = ()
    # a shell command run per change (--check) in a sandbox of the base plus that change; its wall clock
    check: str | None = None
    check_timeout_s: float = Field(default=600.0, gt=0)

    @field_validator("check")
    @classmethod
    def _command(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must be a shell command, not empty")
        return value


class FleetConfig(_Strict):
    models: tuple[ModelConfig, ...] = ()
    routing: RoutingConfig = RoutingConfig()
    budgets: BudgetsConfig = BudgetsConfig()
    rate_limit: RateLimitConfig = RateLimitConfig()
    provider: ProviderConfig = ProviderConfig()
    guards: GuardsConfig = GuardsConfig()
    context: ContextConfig = ContextConfig()
    prices: dict[str, PriceOverride] = Field(default_factory=dict)
    # What a client asks for (a model id or an fnmatch pattern) -> a `models:` name or a model id.
    aliases: dict[str, str] = Field(default_factory=dict)
    # A path to a Kueue YAML file, or the Kueue objects inline; the admission plane parses them.
    queues: str | list[dict[str, Any]] | None = None
    # name -> {command, args, env, cwd} (stdio) or {url, headers} (HTTP); checked by the hands plane
    mcp_servers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    hands: HandsConfig = HandsConfig()
    dispatch: DispatchConfig = DispatchConfig()
    verification: VerificationConfigModel = VerificationConfigModel()
    supervision: SupervisionConfig = SupervisionConfig()
    teams: dict[str, TeamConfig] = Field(default_factory=dict)  # `agent-fleet serve`'s tenants
    aggregate: AggregateSettings = AggregateSettings()
    changes: ChangesConfig = ChangesConfig()

    @model_validator(mode="after")
    def _names(self) -> FleetConfig:
        names = [m.name for m in self.models]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"model names must be unique: {', '.join(dupes)}")
        for m in self.models:
            for f in m.fallback:
                if f not in names:
                    raise ValueError(f"model {m.name!r} falls back to unknown model {f!r}")
        for asked, target in self.aliases.items():
            if not asked or not target:
                raise ValueError("aliases: names and targets must not be empty")
        if self.routing.classifier is not None and self.routing.classifier not in names:
            raise ValueError(f"routing.classifier names unknown model {self.routing.classifier!r}")
        return self

    def model(self, name: str) -> ModelConfig | None:
        for m in self.models:
            if m.name == name or m.model == name:
                return m
        return None


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ()))
    msg = str(err.get("msg", "invalid"))
    msg = msg.removeprefix("Value error, ")
    return f"{where}: {msg}" if where else msg


def parse_config(data: Any, *, source: str = "fleet.yaml") -> FleetConfig:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping")
    try:
        return FleetConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_first_error(exc)}") from None


_LOADED: dict[tuple[str, int, int, int], FleetConfig] = {}


def load_config(path: str | Path | None) -> FleetConfig:
    """Read and check fleet.yaml; ``None`` gives the defaults. Raises ConfigError (one line).

    A file is parsed once: while its size, inode and modification time stay the same, the same
    (frozen) config is returned, so the planes of one run all see one reading of it."""
    if path is None:
        return FleetConfig()
    p = Path(path)
    try:
        st = p.stat()
        key: tuple[str, int, int, int] | None = (str(p.resolve()), st.st_mtime_ns, st.st_size, st.st_ino)
    except OSError:
        key = None  # read_yaml_file says what is wrong with it
    if key is not None and key in _LOADED:
        return _LOADED[key]
    data = load_yaml(read_yaml_file(p, what="fleet.yaml"), source=str(p))
    config = parse_config(data, source=str(p))
    if key is not None:
        if len(_LOADED) >= 64:
            _LOADED.clear()
        _LOADED[key] = config
    return config
