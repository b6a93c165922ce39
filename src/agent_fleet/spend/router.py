"""Routing by difficulty: pure decisions that return a model and the reason, for the session log.

* :func:`estimate_difficulty` rates a session in [0, 1] from its partition (size and kind), the task's
  wording and, when configured, a cheap classifier's score (which then weighs half).
* :meth:`Router.route` maps the difficulty to a tier (< 0.35 simple, < 0.7 medium, else complex) and
  takes the first available model of that tier, else the nearest tier above, else below.
* :func:`demotions` names the models whose quality signals (verification agreement, malformed tool
  calls, truncated answers) are under fleet.yaml ``supervision.quality``; :meth:`Router.route` passes
  over a demoted model while a model that is not demoted is left, and says so in the reason.
* :meth:`Router.fallback` follows a model's declared ``fallback`` chain, then the other models by tier
  (up first), skipping every model that failed or is exhausted.

The engine records each decision as a ``route`` event ``{model, reason}``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from agent_fleet.config import TIERS, ModelConfig, QualityPolicy
from agent_fleet.domain.model_quality import ModelSignals
from agent_fleet.domain.plan import InputKind, Partition
from agent_fleet.errors import (
    ConfigError,
)

__all__ = [
    "Difficulty",
    "Route",
    "Router",
    "classifier_prompt",
    "demotions",
    "estimate_difficulty",
    "parse_classifier_score",
]

_HARD = re.compile(
    r"\b(security|vulnerab\w*|exploit\w*|audit\w*|prove|proof|concurren\w*|race|deadlock|refactor\w*|"
    r"architect\w*|design|root cause|debug\w*|optimi[sz]\w*|cryptograph\w*|formal|verify|reason\w*)\b",
    re.IGNORECASE,
)
_EASY = re.compile(
    r"\b(summari[sz]e\w*|classif\w*|extract\w*|list|count|translate\w*|tag\w*|label\w*|format\w*|"
    r"spell\w*|typo\w*|title\w*|keywords?)\b",
    re.IGNORECASE,
)
_KIND_BASE = {
    InputKind.DIRECTORY: 0.45,  # code: tools, cross-file reading
    InputKind.NONE: 0.4,
    InputKind.JSONL: 0.3,
    InputKind.CSV: 0.25,
    InputKind.LIST: 0.25,
}


@dataclass(frozen=True, slots=True)
class Difficulty:
    score: float
    reason: str


def estimate_difficulty(partition: Partition | None, task: str, *, classifier_score: float | None = None) -> Difficulty:
    parts: list[str] = []
    if partition is None:
        score = _KIND_BASE[InputKind.NONE]
        parts.append("no partition")
    else:
        score = _KIND_BASE.get(partition.kind, 0.35)
        parts.append(f"{partition.kind} input")
        # Larger partitions need more context juggling: up to +0.2 at 100k estimated tokens.
        size = min(1.0, partition.est_tokens / 100_000)
        score += 0.2 * size
        parts.append(f"~{partition.est_tokens:,} tokens")
    hard = len(set(m.lower() for m in _HARD.findall(task)))
    easy = len(set(m.lower() for m in _EASY.findall(task)))
    if hard:
        score += min(0.3, 0.15 * hard)
        parts.append(f"{hard} hard cue{'s' if hard > 1 else ''} in the task")
    if easy:
        score -= min(0.2, 0.1 * easy)
        parts.append(f"{easy} easy cue{'s' if easy > 1 else ''} in the task")
    if classifier_score is not None:
        c = min(1.0, max(0.0, classifier_score))
        score = 0.5 * score + 0.5 * c
        parts.append(f"classifier {c:.2f}")
    score = round(min(1.0, max(0.0, score)), 3)
    return Difficulty(score, f"difficulty {score:.2f} ({', '.join(parts)})")


def classifier_prompt(task: str, partition: Partition | None) -> list[dict[str, str]]:
    """Messages for a cheap model call that rates difficulty 0-10 (answer: one number)."""
    sample = "" if partition is None else "\n".join(partition.items[:20])
    return [
        {
            "role": "system",
            "content": "Rate how hard this task is for a language model, from 0 (trivial) to 10 (expert). "
            "Answer with one number only.",
        },
        {"role": "user", "content": f"Task: {task}\n\nSample of the input:\n{sample}"},
    ]


def parse_classifier_score(text: str | None) -> float | None:
    """The classifier's 0-10 answer as 0-1, or None when it gave no number."""
    m = re.search(r"\d+(?:\.\d+)?", text or "")
    if m is None:
        return None
    return min(10.0, float(m.group())) / 10.0


def tier_for(score: float) -> str:
    return "simple" if score < 0.35 else "medium" if score < 0.7 else "complex"


@dataclass(frozen=True, slots=True)
class Route:
    name: str  # the fleet.yaml model name
    model: str  # the provider's model id
    tier: str
    reason: str

    def to_event(self) -> dict[str, str]:
        return {"model": self.model, "name": self.name, "tier": self.tier, "reason": self.reason}


def demotions(signals: Mapping[str, ModelSignals], policy: QualityPolicy) -> dict[str, tuple[str, ...]]:
    """Model id → why it is demoted, for every model under a quality threshold. A signal counts only
    once there is enough of it (``min_judged`` verdicts, ``min_calls`` answers)."""
    out: dict[str, tuple[str, ...]] = {}
    for model, s in signals.items():
        reasons = []
        agreement = s.agreement
        if agreement is not None and s.judged >= policy.min_judged and agreement < policy.min_agreement:
            reasons.append(f"verification agreement {agreement:.0%} < {policy.min_agreement:.0%}")
        if s.calls >= policy.min_calls:
            truncated = s.truncated_rate or 0.0
            if truncated > policy.max_truncated_rate:
                reasons.append(f"truncated answers {truncated:.0%} > {policy.max_truncated_rate:.0%}")
            malformed = s.malformed_rate or 0.0
            if malformed > policy.max_malformed_rate:
                reasons.append(f"malformed tool calls {malformed:.0%} > {policy.max_malformed_rate:.0%}")
        if reasons:
            out[model] = tuple(reasons)
    return out


class Router:
    def __init__(self, models: Sequence[ModelConfig]) -> None:
        if not models:
            raise ConfigError("routing needs at least one model")
        self.models = tuple(models)
        self._by_name = {m.name: m for m in self.models}

    def _ordered_from(self, tier: str) -> list[ModelConfig]:
        """Models of ``tier``, then the tiers above it (nearest first), then those below."""
        i = TIERS.index(tier)
        order = [TIERS[i], *TIERS[i + 1 :], *reversed(TIERS[:i])]
        return [m for t in order for m in self.models if m.tier == t]

    def route(
        self,
        difficulty: Difficulty,
        *,
        unavailable: Collection[str] = (),
        demoted: Mapping[str, Sequence[str]] | None = None,
    ) -> Route:
        """The model for a new session. ``demoted`` (model name or id → reasons) are passed over while
        a model that is not demoted is available; when only demoted ones are left the first is used."""
        tier = tier_for(difficulty.score)
        demoted = demoted or {}
        free = [m for m in self._ordered_from(tier) if m.name not in unavailable and m.model not in unavailable]
        if not free:
            raise ConfigError("every configured model is unavailable (failed or out of quota)")

        def why_demoted(m: ModelConfig) -> Sequence[str] | None:
            return demoted.get(m.name) or demoted.get(m.model)

        m = next((c for c in free if not why_demoted(c)), free[0])
        why = f"{difficulty.reason} → tier {tier}"
        passed = [c for c in free[: free.index(m)] if why_demoted(c)]
        if passed:
            why += "; " + "; ".join(f"{c.name} demoted ({', '.join(why_demoted(c) or ())})" for c in passed)
        if why_demoted(m):
            why += f"; every model left is demoted, using {m.name}"
        elif m.tier != tier:
            why += f"; no model {'fit' if passed else 'free'} in tier {tier}, using {m.tier}"
        return Route(m.name, m.model, m.tier, why)

    def fallback(self, current: str, *, cause: str, unavailable: Collection[str] = ()) -> Route | None:
        """The next model after ``current`` (name or model id) failed for ``cause``; None when none is left."""
        cur = self._by_name.get(current) or next((m for m in self.models if m.model == current), None)
        if cur is None:
            return None
        skip = {*unavailable, cur.name, cur.model}
        chain = [self._by_name[n] for n in cur.fallback] + self._ordered_from(cur.tier)
        for m in chain:
            if m.name in skip or m.model in skip:
                continue
            how = "declared fallback" if m.name in cur.fallback else f"nearest tier ({m.tier})"
            return Route(m.name, m.model, m.tier, f"{cur.name} {cause}; {how}")
        return None
