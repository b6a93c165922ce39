"""Streaming deduplication of a run's results, with an exact pass at the end.

Results arrive in whatever order sessions finish, while the best version of a finding (highest
confidence) may come last. The two goals — a live dedup rate and a final output that keeps the best
member with no transitive chaining — are met in two passes over the same cached vectors:

* **streaming** (:meth:`Aggregator.add`): exact duplicates by normalised-text hash first, then greedy
  leader assignment in *arrival* order. The decision is provisional; the live rate it gives is
  close to the final one (the same rule on the same vectors, only the order differs).
* **final** (:meth:`Aggregator.finalize`): the same greedy rule re-run in *rank* order (confidence
  descending, then the most complete body, then the earliest) on the vectors already embedded.
  Every member is within the threshold of its representative and the representative is the best
  member, by construction. Nothing is embedded again. The results streaming has not reached when
  the run ends go to this pass directly (:meth:`Aggregator.extend`): they take no provisional
  decision that the pass would redo at once, and a text is embedded only if a decision compares it
  — a result alone in its scope (one summary of one page) is never embedded.

Exact duplicates never reach the embedder: within a hash group the best-ranked member stands for
the group, and the others follow it into whichever cluster it joins.

The scope (``AggregateConfig.scope``, :mod:`agent_fleet.aggregate.scope`) limits which results are
compared: with ``item``, results about different input items merge only when byte-identical. Nothing
merged is lost: each representative lists every other member — its id, session, partition, location,
confidence and similarity — under ``occurrences``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from agent_fleet.aggregate.cache import EmbeddingCache
from agent_fleet.aggregate.categorize import CategoryNamer, assign_categories, canonical_category
from agent_fleet.aggregate.embedders import Embedder, SyncEmbedder
from agent_fleet.aggregate.final_pass import Clusters, ScopePasses, cluster_final, plan_final
from agent_fleet.aggregate.index import LeaderIndex, make_index
from agent_fleet.aggregate.scope import DedupScope, scope_key
from agent_fleet.aggregate.text import content_hash, embedding_text, full_text, raw_hash, text_hash
from agent_fleet.aggregate.vectors import Vector
from agent_fleet.domain.results import ResultItem

__all__ = [
    "UNCATEGORIZED",
    "AggregateConfig",
    "AggregateStats",
    "Aggregator",
    "CategoryStats",
    "Decision",
    "DecisionKind",
]

UNCATEGORIZED = "uncategorized"


class DecisionKind(StrEnum):
    NEW = "new"  # kept as a new representative
    NEAR_DUPLICATE = "near_duplicate"  # absorbed into a leader at similarity >= threshold
    EXACT_DUPLICATE = "exact_duplicate"  # same normalised text as an earlier result


@dataclass(frozen=True, slots=True)
class Decision:
    kind: DecisionKind
    item_id: str
    leader_id: str  # the representative the item belongs to (itself when NEW)
    similarity: float  # to the leader; 1.0 when NEW
    exact_of: str | None = None  # for EXACT_DUPLICATE: the earlier result with the same text

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": str(self.kind),
            "item_id": self.item_id,
            "leader_id": self.leader_id,
            "similarity": round(self.similarity, 6),
            "exact_of": self.exact_of,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class AggregateConfig:
    threshold: float | None = None  # cosine at which two results are one; None: the embedder's default
    exact_leader_limit: int = 4096  # above this many leaders, an inverted file over them (numpy)
    index: str = "auto"  # "auto" | "exact" ("faiss": the same as "auto")
    embed_batch: int = 256
    categorize: bool = True  # give representatives without a category one found by clustering
    category_threshold: float | None = None  # None: 0.6 x the dedup threshold (looser grouping)
    scope: DedupScope = DedupScope.GLOBAL  # which results are compared (aggregate/scope.py)
    scope_reason: str = ""  # why that scope: fleet.yaml or the task type's default


@dataclass(frozen=True, slots=True)
class CategoryStats:
    raw: int  # results in clusters whose representative has this category
    unique: int
    dedup_rate: float

    def to_dict(self) -> dict[str, Any]:
        return {"raw": self.raw, "unique": self.unique, "dedup_rate": round(self.dedup_rate, 4)}


@dataclass(frozen=True, slots=True)
class AggregateStats:
    raw: int
    unique: int
    exact_duplicates: int
    near_duplicates: int
    dedup_rate: float  # 1 - unique / raw
    embedded: int  # texts sent to the embedder (cache misses)
    cache_hits: int
    final: bool  # False while decisions are provisional (streaming)
    threshold: float
    embedder: str
    per_category: dict[str, CategoryStats] = field(default_factory=dict)
    scope: str = "global"
    scope_reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "raw": self.raw,
            "unique": self.unique,
            "exact_duplicates": self.exact_duplicates,
            "near_duplicates": self.near_duplicates,
            "dedup_rate": round(self.dedup_rate, 4),
            "embedded": self.embedded,
            "cache_hits": self.cache_hits,
            "final": self.final,
            "threshold": self.threshold,
            "embedder": self.embedder,
            "scope": self.scope,
            "scope_reason": self.scope_reason,
            "per_category": {k: v.to_dict() for k, v in sorted(self.per_category.items())},
        }


class Aggregator:
    """Collects results one by one; see the module docstring for the two passes.

    Not safe for concurrent ``add`` from threads; concurrent tasks on one loop are serialised by
    an internal lock. ``add`` of a result id already seen returns the earlier decision, so a resumed
    run can replay every result of the log.
    """

    def __init__(
        self,
        embedder: Embedder,
        *,
        config: AggregateConfig | None = None,
        cache: EmbeddingCache | None = None,
    ) -> None:
        self.embedder = embedder
        self.config = config or AggregateConfig()
        self.threshold = self.config.threshold if self.config.threshold is not None else embedder.default_threshold
        self.cache = cache
        self._items: list[ResultItem] = []
        self._hashes: list[str] = []  # content hash: the vector's key
        self._scopes: list[str] = []  # scope key (aggregate/scope.py)
        self._keys: list[str] = []  # exact-duplicate group within the scope
        self._raws: list[str] = []  # byte-identical text (merges across scope keys)
        self._first_of_hash: dict[str, int] = {}
        self._first_with_text: dict[str, int] = {}  # content hash -> first result with it: whose text is embedded
        self._first_of_raw: dict[str, int] = {}
        self._by_id: dict[str, int] = {}
        self._vectors: dict[str, Vector] = {}
        self._stream = Clusters([], [], [])
        self._unstreamed: list[int] = []  # results added by extend(): no streaming decision yet
        self._stream_index: dict[str, tuple[LeaderIndex, list[int]]] = {}  # scope key -> index, its items
        self._final: list[ResultItem] | None = None
        self._final_clusters: Clusters | None = None
        self._scope_passes: ScopePasses = {}  # each scope's last final pass (final_pass.cluster_final)
        self._embedded = 0
        self._cache_hits = 0
        self._lock = asyncio.Lock()

    @classmethod
    def for_run(cls, out_dir: str | Path, embedder: Embedder, *, config: AggregateConfig | None = None) -> Aggregator:
        """An aggregator whose embedding cache lives in ``out_dir/embeddings.sqlite`` (kept across resumes)."""
        return cls(embedder, config=config, cache=EmbeddingCache(Path(out_dir) / "embeddings.sqlite"))

    def _new_index(self) -> LeaderIndex:
        return make_index(
            self.embedder.kind,
            threshold=self.threshold,
            exact_limit=self.config.exact_leader_limit,
            ann=self.config.index,
        )

    # -- streaming ---------------------------------------------------------------------------------

    async def add(self, item: ResultItem) -> Decision:
        return (await self.add_many([item]))[0]

    async def add_many(self, items: Iterable[ResultItem]) -> list[Decision]:
        """Add results in order; their new texts are embedded in one batch."""
        async with self._lock:
            batch = list(items)
            fresh = self._fresh(batch)
            late = [i for i in self._unstreamed if self._stream.exact_of[i] is None]
            todo = self._embedding_todo(late)
            for it, _, h in fresh:  # the first result with a text is the one embedded
                if h not in self._vectors and h not in todo:
                    todo[h] = embedding_text(it)
            await self._ensure_vectors(todo)
            self._catch_up()
            for it, text, h in fresh:
                self._admit(it, text, h)
            return [self._decision(self._stream, self._by_id[it.id]) for it in batch]

    def _fresh(self, items: Iterable[ResultItem]) -> list[tuple[ResultItem, str, str]]:
        """The results not added yet (first of each id), each with its full text and content hash."""
        fresh: dict[str, tuple[ResultItem, str, str]] = {}
        for it in items:
            if it.id not in self._by_id and it.id not in fresh:
                text = full_text(it)
                fresh[it.id] = (it, text, text_hash(text))
        return list(fresh.values())

    def _embedding_todo(self, indices: Iterable[int]) -> dict[str, str]:
        """Content hash -> text to embed, for the results among ``indices`` without a vector yet.

        A hash's vector is always embedded from the first result that came with it (as streaming
        does): texts equal after normalising may still differ to a model (case, punctuation)."""
        todo: dict[str, str] = {}
        for i in indices:
            h = self._hashes[i]
            if h not in self._vectors and h not in todo:
                todo[h] = embedding_text(self._items[self._first_with_text[h]])
        return todo

    async def _ensure_vectors(self, todo: dict[str, str]) -> None:
        """Vectors for the texts of ``todo`` (content hash -> full text): from the cache, else embedded."""
        if not todo:
            return
        if self.cache is not None:
            cached = await asyncio.to_thread(self.cache.get_many, self.embedder.name, list(todo))
            self._vectors.update(cached)
            self._cache_hits += len(cached)
            for h in cached:
                del todo[h]
        hashes = list(todo)
        for start in range(0, len(hashes), self.config.embed_batch):
            part = hashes[start : start + self.config.embed_batch]
            texts = [todo[h] for h in part]
            if isinstance(self.embedder, SyncEmbedder):
                vecs = await asyncio.to_thread(self.embedder.encode, texts)
            else:
                vecs = await self.embedder.embed(texts)
            fresh = list(zip(part, vecs, strict=True))
            self._vectors.update(fresh)
            self._embedded += len(fresh)
            if self.cache is not None:
                await asyncio.to_thread(self.cache.put_many, self.embedder.name, fresh)

    def _scope_of(self, item: ResultItem) -> str:
        return scope_key(item, self.config.scope)

    def _admit(self, item: ResultItem, text: str, h: str, *, stream: bool = True) -> None:
        """File a result whose full text is ``text`` and content hash ``h``. With ``stream``, its
        streaming decision is taken now (its vector must be ready, unless it is an exact duplicate);
        without, it waits in ``_unstreamed`` for :meth:`_catch_up` (nothing needs its vector yet)."""
        self._final = None
        self._final_clusters = None
        idx = len(self._items)
        key = self._scope_of(item)
        exact_key = f"{key}|{h}" if key else h
        raw = raw_hash(text)
        self._items.append(item)
        self._hashes.append(h)
        self._scopes.append(key)
        self._keys.append(exact_key)
        self._raws.append(raw)
        self._by_id[item.id] = idx
        self._first_with_text.setdefault(h, idx)
        twin = self._first_of_hash.get(exact_key)
        if twin is None:
            twin = self._first_of_raw.get(raw)
        self._first_of_raw.setdefault(raw, idx)
        if twin is None:
            self._first_of_hash[exact_key] = idx
        # a placeholder until the decision is taken: the result leads itself (or follows its twin)
        self._stream.leader.append(idx)
        self._stream.similarity.append(1.0)
        self._stream.exact_of.append(twin)
        if stream and not self._unstreamed:
            self._stream_one(idx)
        else:
            self._unstreamed.append(idx)

    def _stream_one(self, idx: int) -> None:
        """The streaming decision of result ``idx``, every result before it decided."""
        st = self._stream
        twin = st.exact_of[idx]
        if twin is not None:
            st.leader[idx] = st.leader[twin]
            st.similarity[idx] = st.similarity[twin]
            return
        key = self._scopes[idx]
        index, members = self._stream_index.get(key) or self._stream_index.setdefault(key, (self._new_index(), []))
        (a,) = index.assign([self._vectors[self._hashes[idx]]])
        members.append(idx)
        st.leader[idx] = members[a.leader]
        st.similarity[idx] = a.similarity

    def _catch_up(self) -> None:
        """Streaming decisions for the results added without one, in the order they came."""
        for idx in self._unstreamed:
            self._stream_one(idx)
        self._unstreamed = []

    def _decision(self, cl: Clusters, idx: int) -> Decision:
        item = self._items[idx]
        leader = cl.leader[idx]
        twin = cl.exact_of[idx]
        if twin is not None:
            return Decision(
                DecisionKind.EXACT_DUPLICATE, item.id, self._items[leader].id, cl.similarity[idx], self._items[twin].id
            )
        if leader == idx:
            return Decision(DecisionKind.NEW, item.id, item.id, 1.0)
        return Decision(DecisionKind.NEAR_DUPLICATE, item.id, self._items[leader].id, cl.similarity[idx])

    # -- final pass --------------------------------------------------------------------------------

    async def extend(self, items: Iterable[ResultItem]) -> None:
        """Add results for the next :meth:`finalize` only (ids already added are skipped): they take
        no streaming decision and nothing is embedded for them now. That pass embeds only the texts
        its decisions compare — of results that share their scope with another text
        (:mod:`~agent_fleet.aggregate.final_pass`) and of representatives that need a category
        found. A later :meth:`add_many` takes their streaming decisions first, in the order they came."""
        async with self._lock:
            for it, text, h in self._fresh(items):
                self._admit(it, text, h, stream=False)

    async def _final_pass(self) -> Clusters:
        """The final pass over the results so far (the lock held); a scope whose heads have not
        changed since the last pass keeps that pass's clusters (the same heads in the same order,
        on the same vectors, cluster the same way)."""
        plan = await asyncio.to_thread(plan_final, self._items, self._keys, self._raws, self._scopes)
        await self._ensure_vectors(self._embedding_todo(plan.compared()))
        return await asyncio.to_thread(cluster_final, plan, self._vector_at, self._new_index, self._scope_passes)

    async def prepare_final(self) -> None:
        """The final pass over the results so far, nothing made final: a later :meth:`finalize` redoes
        only the scopes whose results changed since (a run does this while its last sessions run).
        Nothing to do when every result shares one scope: that pass is redone whole anyway."""
        if self.config.scope == DedupScope.GLOBAL:
            return
        async with self._lock:
            await self._final_pass()

    async def finalize(self, *, namer: CategoryNamer | None = None) -> list[ResultItem]:
        """Re-cluster in rank order, categorise, and return the representatives.

        Call after the last ``add``; a later ``add`` makes the state provisional again.
        """
        async with self._lock:
            cl = await self._final_pass()
            reps = self._representatives(cl)
            if self.config.categorize:
                by_id = self._by_id
                unnamed = [by_id[r.id] for r in reps if canonical_category(r.category) is None]
                await self._ensure_vectors(self._embedding_todo(unnamed))
                cat_t = self.config.category_threshold
                reps = await assign_categories(
                    reps,
                    self.vector_of,
                    kind=self.embedder.kind,
                    threshold=cat_t if cat_t is not None else 0.6 * self.threshold,
                    namer=namer,
                )
            self._final_clusters = cl
            self._final = reps
            return list(reps)

    def _vector_at(self, i: int) -> Vector:
        return self._vectors[self._hashes[i]]

    def set_representatives(self, reps: Sequence[ResultItem]) -> None:
        """Replace the final representatives by edited copies (categories, verification status).

        The ids must be the finalised representatives' own; stats follow the new categories.
        """
        if self._final is None:
            raise RuntimeError("finalize() first")
        if sorted(r.id for r in reps) != sorted(r.id for r in self._final):
            raise ValueError("representatives must keep the same ids")
        self._final = list(reps)

    # -- views -------------------------------------------------------------------------------------

    def _representatives(self, cl: Clusters) -> list[ResultItem]:
        members: dict[int, list[int]] = {}
        for i, leader in enumerate(cl.leader):
            if leader != i:
                members.setdefault(leader, []).append(i)
        reps = []
        for i, item in enumerate(self._items):
            if cl.leader[i] != i:
                continue
            mem = sorted(members.get(i, []), key=lambda m: (-cl.similarity[m], m))
            extra = dict(item.extra)
            extra["duplicate_similarity"] = {self._items[m].id: round(cl.similarity[m], 4) for m in mem}
            locations = sorted({loc for m in mem if (loc := self._items[m].location) and loc != item.location})
            if locations:
                extra["duplicate_locations"] = locations
            if mem:
                extra["occurrences"] = [self._occurrence(cl, m) for m in mem]
            reps.append(replace(item, duplicates=tuple(self._items[m].id for m in mem), extra=extra))
        return reps

    def _occurrence(self, cl: Clusters, m: int) -> dict[str, Any]:
        """Where a merged result was found, as it was reported."""
        it = self._items[m]
        return {
            "id": it.id,
            "session_id": it.session_id,
            "partition_id": it.partition_id,
            "location": it.location,
            "confidence": it.confidence,
            "similarity": round(cl.similarity[m], 4),
            "exact": cl.exact_of[m] is not None,
        }

    def representatives(self) -> list[ResultItem]:
        """The final representatives after :meth:`finalize`, else the provisional ones, in arrival order."""
        if self._final is not None:
            return list(self._final)
        return self._representatives(self._stream)

    def decisions(self) -> list[Decision]:
        """One decision per result, final after :meth:`finalize`, else provisional; in arrival order."""
        cl = self._final_clusters or self._stream
        return [self._decision(cl, i) for i in range(len(self._items))]

    def vector_of(self, item: ResultItem) -> Vector:
        return self._vectors[content_hash(item)]

    def stats(self) -> AggregateStats:
        cl = self._final_clusters or self._stream
        final = self._final_clusters is not None
        n = len(self._items)
        category: dict[int, str] = {}
        if self._final is not None:
            by_id = {r.id: r for r in self._final}
            for i in range(n):
                if cl.leader[i] == i:
                    category[i] = by_id[self._items[i].id].category or UNCATEGORIZED
        raw: dict[str, int] = {}
        unique: dict[str, int] = {}
        exact = near = 0
        for i in range(n):
            leader = cl.leader[i]
            cat = category.get(leader) or self._items[leader].category or UNCATEGORIZED
            raw[cat] = raw.get(cat, 0) + 1
            if leader == i:
                unique[cat] = unique.get(cat, 0) + 1
            elif cl.exact_of[i] is not None:
                exact += 1
            else:
                near += 1
        n_unique = sum(unique.values())
        return AggregateStats(
            raw=n,
            unique=n_unique,
            exact_duplicates=exact,
            near_duplicates=near,
            dedup_rate=1.0 - n_unique / n if n else 0.0,
            embedded=self._embedded,
            cache_hits=self._cache_hits,
            final=final,
            threshold=self.threshold,
            embedder=self.embedder.name,
            per_category={c: CategoryStats(raw[c], unique.get(c, 0), 1.0 - unique.get(c, 0) / raw[c]) for c in raw},
            scope=str(self.config.scope),
            scope_reason=self.config.scope_reason,
        )

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, result_id: object) -> bool:
        """Whether a result of that id has been added."""
        return result_id in self._by_id

    def __repr__(self) -> str:
        s = self.stats()
        return (
            f"Aggregator(embedder={self.embedder.name!r}, raw={s.raw}, unique={s.unique}, "
            f"dedup_rate={s.dedup_rate:.3f}, final={s.final})"
        )
