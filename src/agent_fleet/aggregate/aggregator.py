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

The scope (``AggregateConfig.scope``, :mod:`agent_fleet.aggregate.merge_scope`) limits which results are
compared: by default (identity) results about different input items of the plan never merge, and a
result alone in its scope is never embedded. Nothing merged is lost: each representative lists every
other member — its place, session, confidence, similarity and, where they differ, its words — under
``occurrences``, and counts the sessions that reported it (:mod:`agent_fleet.aggregate.members`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from agent_fleet.aggregate.blas import single_threaded_blas
from agent_fleet.aggregate.categorize import CategoryNamer, assign_categories, canonical_category
from agent_fleet.aggregate.embedders import Embedder, SyncEmbedder
from agent_fleet.aggregate.embedding_cache import EmbeddingCache
from agent_fleet.aggregate.final_pass import Clusters, ScopePasses, cluster_final, plan_final
from agent_fleet.aggregate.index import LeaderIndex, make_index
from agent_fleet.aggregate.members import representatives
from agent_fleet.aggregate.merge_scope import DedupScope, Identity, ItemIndex, identity_counts, scope_keys
from agent_fleet.aggregate.text import content_hash, embedding_text, full_text, raw_hash, text_hash, valid_text
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
    scope: DedupScope = DedupScope.AUTO  # which results are compared (aggregate/merge_scope.py)
    scope_reason: str = ""  # what chose that scope: --dedup-scope, fleet.yaml or the default
    items: ItemIndex | None = None  # the plan's input items: what each result is about
    threshold_source: str = ""  # what chose the threshold: --dedup-threshold, fleet.yaml or the embedder


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
    scope: str = "auto"
    scope_reason: str = ""
    identity: dict[str, int] = field(default_factory=dict)  # results by how their item was known
    threshold_source: str = ""

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
            "identity": dict(self.identity),
            "threshold_source": self.threshold_source,
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
        self._items_index = self.config.items or ItemIndex()
        self._scopes: list[str] = []  # compare key (aggregate/merge_scope.py): near duplicates share it
        self._keys: list[str] = []  # exact-duplicate group: the same normalised text within one identity
        self._raws: list[str] = []  # byte-identical text within one identity
        self._how: list[Identity] = []  # how each result's input item was known
        self._first_of_hash: dict[str, int] = {}
        self._first_with_text: dict[str, int] = {}  # content hash -> first result with it: whose text is embedded
        self._first_of_raw: dict[str, int] = {}
        self._by_id: dict[str, int] = {}
        self._vectors: dict[str, Vector] = {}
        self._stream = Clusters([], [], [])
        self._unstreamed: list[int] = []  # results added by extend(): no streaming decision yet
        # compare key -> the heads streamed into it, in order; its index once it has two (a head alone
        # in its scope leads itself, and nothing is embedded for it until another joins). A lone head
        # is kept as its index alone: most scopes (one input item each) never get a second one.
        self._stream_heads: dict[str, list[int] | int] = {}
        # one copy of each session id, partition id and category the results repeat (see _fresh)
        self._shared: dict[str, str] = {}
        self._stream_index: dict[str, LeaderIndex] = {}
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
        """Add results in order; the texts their decisions compare are embedded in one batch (a result
        alone in its scope so far is compared with nothing: it is embedded once another joins it)."""
        async with self._lock:
            batch = list(items)
            for it, text, h in self._fresh(batch):
                self._admit(it, text, h, stream=False)
            await self._ensure_vectors(self._embedding_todo(self._stream_needs()))
            self._catch_up()
            return [self._decision(self._stream, self._by_id[it.id]) for it in batch]

    def _fresh(self, items: Iterable[ResultItem]) -> list[tuple[ResultItem, str, str]]:
        """The results not added yet (first of each id), each with its full text and content hash."""
        fresh: dict[str, tuple[ResultItem, str, str]] = {}
        for it in items:
            if it.id not in self._by_id and it.id not in fresh:
                title, body = valid_text(it.title), valid_text(it.body)
                if title is not it.title or body is not it.body:  # a lone surrogate: what UTF-8 can carry
                    it = replace(it, title=title, body=body)
                it = self._sharing(it)
                text = full_text(it)
                fresh[it.id] = (it, text, text_hash(text))
        return list(fresh.values())

    def _sharing(self, item: ResultItem) -> ResultItem:
        """The result with the strings it repeats from earlier results (its session, its partition, its
        category) as the one copy the aggregator keeps: a run's results are held until its report."""
        shared = self._shared
        sid = shared.setdefault(item.session_id, item.session_id)
        pid = shared.setdefault(item.partition_id, item.partition_id)
        cat = item.category if item.category is None else shared.setdefault(item.category, item.category)
        if sid is item.session_id and pid is item.partition_id and cat is item.category:
            return item
        return replace(item, session_id=sid, partition_id=pid, category=cat)

    def _stream_needs(self) -> list[int]:
        """The results whose streaming decisions (:meth:`_catch_up`) read a vector: the heads of every
        scope that will hold two heads or more, the one that stood alone there before included."""
        new: dict[str, list[int]] = {}
        for i in self._unstreamed:
            if self._stream.exact_of[i] is None:
                new.setdefault(self._scopes[i], []).append(i)
        need: list[int] = []
        for key, heads in new.items():
            earlier = self._heads(key)
            if len(earlier) + len(heads) < 2:
                continue
            if len(earlier) == 1:
                need.append(earlier[0])
            need.extend(heads)
        return need

    def _heads(self, key: str) -> list[int]:
        heads = self._stream_heads.get(key)
        if heads is None:
            return []
        return [heads] if isinstance(heads, int) else heads

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
                with single_threaded_blas():  # entered on the loop's thread: see aggregate.blas
                    vecs = await asyncio.to_thread(self.embedder.encode, texts)
            else:
                vecs = await self.embedder.embed(texts)
            fresh = list(zip(part, vecs, strict=True))
            self._vectors.update(fresh)
            self._embedded += len(fresh)
            if self.cache is not None:
                await asyncio.to_thread(self.cache.put_many, self.embedder.name, fresh)

    def _admit(self, item: ResultItem, text: str, h: str, *, stream: bool = True) -> None:
        """File a result whose full text is ``text`` and content hash ``h``. With ``stream``, its
        streaming decision is taken now (its vector must be ready if it shares its scope, unless it is
        an exact duplicate); without, it waits in ``_unstreamed`` for :meth:`_catch_up`."""
        self._final = None
        self._final_clusters = None
        idx = len(self._items)
        about, how = self._items_index.identify(item)
        key, exact = scope_keys(item, self.config.scope, about)
        raw = raw_hash(text)
        # with "none" only byte-identical texts merge
        by = f"raw:{raw}" if self.config.scope is DedupScope.NONE else h
        # within a prefix, a key is a hash of both: as short as the hash alone (one is kept per result)
        h_key = raw_hash(f"{exact}|{by}") if exact else by
        raw_key = raw_hash(f"{exact}|{raw}") if exact else raw
        self._items.append(item)
        self._hashes.append(h)
        self._scopes.append(key)
        self._keys.append(h_key)
        self._raws.append(raw_key)
        self._how.append(how)
        self._by_id[item.id] = idx
        self._first_with_text.setdefault(h, idx)
        twin = self._first_of_hash.get(h_key)
        if twin is None:
            twin = self._first_of_raw.get(raw_key)
        self._first_of_raw.setdefault(raw_key, idx)
        if twin is None:
            self._first_of_hash[h_key] = idx
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
        heads = self._stream_heads.get(key)
        if heads is None:  # alone in its scope so far: it leads itself, no vector read
            self._stream_heads[key] = idx
            return
        if isinstance(heads, int):  # the second head: the first one enters the index now
            heads = self._stream_heads[key] = [heads]
            index = self._stream_index[key] = self._new_index()
            index.assign([self._vector_at(heads[0])])
        else:
            index = self._stream_index[key]
        (a,) = index.assign([self._vector_at(idx)])
        heads.append(idx)
        st.leader[idx] = heads[a.leader]
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
        with single_threaded_blas():  # the index's products, in a worker thread: see aggregate.blas
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
        return representatives(self._items, self._hashes, cl)

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
            identity=identity_counts(self._how),
            threshold_source=self.config.threshold_source or ("default" if self.config.threshold is None else "given"),
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
