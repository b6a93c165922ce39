"""List prices: the offline genai-prices table, with per-model overrides from fleet.yaml.

A model's rates are looked up once and kept; pricing a call is then a handful of Decimal
multiplications. Cached input tokens are priced at the cache-read rate *instead of* the input rate
(``Usage.input_tokens`` includes them), cache writes at the cache-write rate, never twice.
What a provider reports as cost (``cost: 0`` on streams, say) is never used: tokens are priced here.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from genai_prices import Usage as GUsage
from genai_prices import calc_price

from agent_fleet.domain.usage import Usage
from agent_fleet.errors import ConfigError

__all__ = ["PriceTable", "Rates"]

_MTOK = Decimal(1_000_000)
_ZERO = Decimal(0)


@dataclass(frozen=True, slots=True, kw_only=True)
class Rates:
    """US dollars per million tokens. ``tiers``: (input-token threshold, rates above it), ascending."""

    input: Decimal
    output: Decimal
    cached_input: Decimal | None = None  # None: same as input
    cache_write: Decimal | None = None  # None: same as input
    tiers: tuple[tuple[int, Rates], ...] = ()
    known: bool = True  # False when the model is in no table and no override: cost shows as 0

    def for_prompt(self, input_tokens: int) -> Rates:
        chosen = self
        for start, rates in self.tiers:
            if input_tokens > start:
                chosen = rates
        return chosen

    def cost(self, usage: Usage) -> Decimal:
        r = self.for_prompt(usage.input_tokens) if self.tiers else self
        cached = usage.cached_input_tokens
        writes = usage.cache_write_tokens
        plain = max(0, usage.input_tokens - cached - writes)
        total = plain * r.input + usage.output_tokens * r.output
        if cached:
            total += cached * (r.input if r.cached_input is None else r.cached_input)
        if writes:
            total += writes * (r.input if r.cache_write is None else r.cache_write)
        return total / _MTOK

    def worst_case(self, prompt_tokens: int, max_tokens: int) -> Decimal:
        """The most a call can cost: every prompt token at the dearest input rate, all output produced."""
        r = self.for_prompt(prompt_tokens) if self.tiers else self
        dearest = max(r.input, r.cache_write or _ZERO, r.cached_input or _ZERO)
        return (prompt_tokens * dearest + max_tokens * r.output) / _MTOK

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Rates:
        """``{input, output, cached_input?, cache_write?}`` in $/MTok (fleet.yaml overrides)."""
        try:
            return cls(
                input=Decimal(str(data["input"])),
                output=Decimal(str(data["output"])),
                cached_input=None if data.get("cached_input") is None else Decimal(str(data["cached_input"])),
                cache_write=None if data.get("cache_write") is None else Decimal(str(data["cache_write"])),
            )
        except (KeyError, ArithmeticError, ValueError):
            raise ConfigError(f"a price override needs input and output in $/MTok: {dict(data)!r}") from None


_UNKNOWN = Rates(input=_ZERO, output=_ZERO, known=False)


def _tiered(value: Any) -> tuple[Decimal, list[tuple[int, Decimal]]]:
    if value is None:
        return _ZERO, []
    if isinstance(value, Decimal):
        return value, []
    base = getattr(value, "base", None)
    tiers = [(int(t.start), Decimal(t.price)) for t in getattr(value, "tiers", ())]
    return (Decimal(base) if base is not None else _ZERO), tiers


def _from_genai(model: str, provider: str | None) -> Rates | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            calc = calc_price(GUsage(input_tokens=1), model, provider_id=provider) if provider else None
            if calc is None:
                calc = calc_price(GUsage(input_tokens=1), model)
    except (LookupError, ValueError):
        return None
    mp = calc.model_price
    fields = {
        "input": _tiered(getattr(mp, "input_mtok", None)),
        "output": _tiered(getattr(mp, "output_mtok", None)),
        "cached_input": _tiered(getattr(mp, "cache_read_mtok", None)),
        "cache_write": _tiered(getattr(mp, "cache_write_mtok", None)),
    }
    has = {
        "cached_input": getattr(mp, "cache_read_mtok", None) is not None,
        "cache_write": getattr(mp, "cache_write_mtok", None) is not None,
    }

    def at(threshold: int | None) -> Rates:
        def pick(name: str) -> Decimal:
            price, tiers = fields[name]
            for start, tier_price in tiers:
                if threshold is not None and start <= threshold:
                    price = tier_price
            return price

        return Rates(
            input=pick("input"),
            output=pick("output"),
            cached_input=pick("cached_input") if has["cached_input"] else None,
            cache_write=pick("cache_write") if has["cache_write"] else None,
        )

    starts = sorted({start for _, tiers in fields.values() for start, _ in tiers})
    base = at(None)
    if not starts:
        return base
    return Rates(
        input=base.input,
        output=base.output,
        cached_input=base.cached_input,
        cache_write=base.cache_write,
        tiers=tuple((start, at(start)) for start in starts),
    )


@dataclass(slots=True)
class PriceTable:
    """Rates by model name: overrides first, then genai-prices, else unknown (priced at zero, flagged)."""

    overrides: dict[str, Rates] = field(default_factory=dict)
    provider_hint: dict[str, str] = field(default_factory=dict)  # model -> genai-prices provider id
    _cache: dict[str, Rates] = field(default_factory=dict, repr=False)

    def rates(self, model: str) -> Rates:
        found = self._cache.get(model)
        if found is None:
            found = self.overrides.get(model) or _from_genai(model, self.provider_hint.get(model)) or _UNKNOWN
            self._cache[model] = found
        return found

    def cost(self, model: str, usage: Usage) -> Decimal:
        return self.rates(model).cost(usage)

    def worst_case(self, model: str, prompt_tokens: int, max_tokens: int) -> Decimal:
        return self.rates(model).worst_case(prompt_tokens, max_tokens)

    def known(self, model: str) -> bool:
        return self.rates(model).known
