"""Which results may be folded into one: decided from the results and the plan, never from the task's words.

The default, ``auto``, is **identity**: a result is *about* an input item when it names that item as a
whole — its ``location`` is the item (a URL, a file path, a list line, a JSON/CSV record or the value of
a key column of the records: a field whose values are distinct across the input), or, without a
location, its text names exactly one item of its own partition. Then:

* results about different input items are different results, however alike their words (two similar
  notes on two URLs stay two);
* results about the same item merge when they say the same thing (a repeated URL's two notes are one);
* results about no particular item merge across the whole run when they say the same thing, every
  place kept: a location *inside* an item (``src/db.py:42``, ``page#section``) is where a finding was
  seen, not what it is about, so one bug class seen in five files is one result with five places.

The other scopes are overrides (fleet.yaml ``aggregate.dedup_scope``, ``deploy --dedup-scope``):

* ``global``: any two results that say the same thing merge, whatever item they are about;
* ``item``: only results about the same item are compared; a result that names none is compared
  with the results of its own location, else of its own partition;
* ``none``: only byte-identical texts merge, never across items.

Merged results are never lost: the representative lists every member (see ``Aggregator``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from agent_fleet.domain.plan import InputKind, Plan
from agent_fleet.domain.results import ResultItem

if TYPE_CHECKING:
    from agent_fleet.aggregate.aggregator import AggregateStats

__all__ = [
    "DedupScope",
    "Identity",
    "ItemIndex",
    "identity_counts",
    "dedup_rule",
    "resolve_scope",
    "scope_keys",
]

_TEXT_SCANNED = 65_536  # characters of a result searched for the item it names (titles and bodies start so)
_SHORTEST_NAME = 4  # an item named in a text must be at least this long ("go" is in every text)
_LONGEST_NAME = 2_000  # a longer item (a whole record) is named by its key columns, not quoted
_PLACE_AFTER = re.compile(r"[:#(]\s*(?:L|line\s*)?\d")  # "path:42", "path#L42", "path (line 42)"


class DedupScope(StrEnum):
    AUTO = "auto"
    GLOBAL = "global"
    ITEM = "item"
    NONE = "none"


class Identity(StrEnum):
    """How a result's item was known."""

    LOCATION = "location"  # its location is the item (or a key of it)
    TEXT = "text"  # its text names exactly one item of its partition
    NONE = "none"  # about no particular item


def resolve_scope(flag: str | None, setting: str | None) -> tuple[DedupScope, str]:
    """The scope and what chose it: ``deploy --dedup-scope``, else fleet.yaml's ``aggregate.dedup_scope``
    (``auto`` there is no choice), else the default, ``auto`` (identity). Both were checked where they
    were read (RunOptions, FleetConfig)."""
    if flag is not None:
        return DedupScope(flag), "--dedup-scope"
    if setting is not None and setting != "auto":
        return DedupScope(setting), "aggregate.dedup_scope in fleet.yaml"
    return DedupScope.AUTO, "default"


def _name(text: str) -> str:
    """How a name is compared: trimmed of quotes and spaces, a URL's scheme and host lowercased and a
    path's trailing slash or leading ``./`` dropped."""
    s = text.strip().strip("`'\"<>").strip()
    if "://" in s:
        try:
            parts = urlsplit(s)
            s = urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path, parts.query, parts.fragment))
        except ValueError:
            pass
    s = s.removeprefix("./")
    return s.rstrip("/") if len(s) > 1 else s


def _same(text: str, original: str) -> str:
    return original if text == original else text


def _record_keys(records: list[str]) -> list[list[str]]:
    """Each JSON record's values in its key columns: top-level fields whose (string or integer) values
    are present in every record and distinct across them (an id, a URL, a SKU)."""
    parsed = []
    for r in records:
        try:
            obj = json.loads(r)
        except ValueError:
            obj = None
        parsed.append(obj if isinstance(obj, dict) else {})
    if len(parsed) < 2:
        return [[] for _ in parsed]
    columns: dict[str, list[str]] = {}
    for key in parsed[0]:
        values = []
        for obj in parsed:
            v = obj.get(key)
            if isinstance(v, bool) or not isinstance(v, str | int) or (isinstance(v, str) and not v.strip()):
                break
            values.append(str(v))
        else:
            if len(set(map(_name, values))) == len(values):
                columns[key] = values
    return [[col[i] for col in columns.values()] for i in range(len(parsed))]


@dataclass(frozen=True, slots=True)
class ItemIndex:
    """The plan's input items by every name a result can give them, and each partition's items."""

    by_name: dict[str, str] = field(default_factory=dict)  # name -> item key (ambiguous names left out)
    by_partition: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)  # (text to find, key)

    @classmethod
    def from_plan(cls, plan: Plan | None) -> ItemIndex:
        if plan is None or plan.kind is InputKind.NONE:
            return cls()
        items = [(p.id, item) for p in plan.partitions for item in p.items]
        # an item is known by its own name: repeats are one item (a name equal to the item is the plan's
        # own string, not a copy: the index lives as long as the run's aggregator)
        keys = [_same(_name(item), item) for _, item in items]
        names: dict[str, set[str]] = {}

        def add(name: str, key: str) -> None:
            if name:
                names.setdefault(name, set()).add(key)

        for key in keys:
            add(key, key)
        if plan.kind in (InputKind.JSONL, InputKind.CSV):
            for key, extra in zip(keys, _record_keys([item for _, item in items]), strict=True):
                for value in extra:
                    add(_name(value), key)
        by_name = {name: next(iter(ks)) for name, ks in names.items() if len(ks) == 1}
        by_partition: dict[str, list[tuple[str, str]]] = {}
        for (pid, item), key in zip(items, keys, strict=True):
            text = item.strip()
            if _SHORTEST_NAME <= len(text) <= _LONGEST_NAME:
                by_partition.setdefault(pid, []).append((text, key))
        return cls(by_name, {pid: tuple(v) for pid, v in by_partition.items()})

    def identify(self, item: ResultItem) -> tuple[str | None, Identity]:
        """The input item ``item`` is about (its key), and how that was known."""
        if item.location:
            key = self.by_name.get(_name(item.location))
            return (key, Identity.LOCATION) if key is not None else (None, Identity.NONE)
        candidates = self.by_partition.get(item.partition_id)
        if not candidates:
            return None, Identity.NONE
        text = f"{item.title}\n{item.body}"[:_TEXT_SCANNED]
        found = {key for name, key in candidates if _names(text, name)}
        if len(found) == 1:
            return found.pop(), Identity.TEXT
        return None, Identity.NONE


def _names(text: str, name: str) -> bool:
    """Whether ``text`` names ``name`` as a whole: not inside a longer word, not as a place in it."""
    start = text.find(name)
    while start >= 0:
        end = start + len(name)
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        whole = not (before.isalnum() or before in "_/") and not (after.isalnum() or after in "_/")
        if whole and not _PLACE_AFTER.match(text, end):
            return True
        start = text.find(name, start + 1)
    return False


def scope_keys(item: ResultItem, scope: DedupScope, about: str | None) -> tuple[str, str]:
    """(compare key, exact key prefix) of a result about ``about`` (an item key or None): results with
    different compare keys are never near duplicates; results with different exact prefixes are never
    exact duplicates either."""
    ident = f"item:{about}" if about is not None else ""
    if scope is DedupScope.GLOBAL:
        return "", ""
    if scope is DedupScope.ITEM:
        own = ident or (f"loc:{item.location}" if item.location else f"part:{item.partition_id}")
        return own, own
    if scope is DedupScope.NONE:
        return f"id:{item.id}", ident
    return ident, ident


def identity_counts(identities: Iterable[Identity]) -> dict[str, int]:
    counts = {str(k): 0 for k in Identity}
    for i in identities:
        counts[str(i)] += 1
    return counts


def dedup_rule(stats: AggregateStats) -> dict[str, Any]:
    """What decided the merges of a run, for its summary and report: the scope, what chose it, the
    threshold and what chose that, how many results were about an input item and how that was known,
    and the rule in words."""
    ident = stats.identity
    t = f"cosine >= {stats.threshold:g} ({stats.embedder}, threshold {stats.threshold_source})"
    if stats.scope == DedupScope.GLOBAL:
        rule = f"global ({stats.scope_reason}): any two results at {t} merge, whatever input item they are about"
    elif stats.scope == DedupScope.ITEM:
        rule = (
            f"item ({stats.scope_reason}): only results about the same input item (else at the same location, "
            f"else of the same partition) are compared, at {t}"
        )
    elif stats.scope == DedupScope.NONE:
        rule = f"none ({stats.scope_reason}): only byte-identical texts about the same input item merge"
    else:
        about = ident.get("location", 0) + ident.get("text", 0)
        rule = (
            f"identity ({stats.scope_reason}): results about different input items are never merged "
            f"({about} of {stats.raw} results name an input item: {ident.get('location', 0)} by location, "
            f"{ident.get('text', 0)} by their text); the same finding about one item, or about no particular "
            f"item, merges at {t}"
        )
    return {
        "scope": stats.scope,
        "reason": stats.scope_reason,
        "rule": rule,
        "threshold": stats.threshold,
        "threshold_source": stats.threshold_source,
        "identity": dict(ident),
    }
