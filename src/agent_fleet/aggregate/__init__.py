"""Aggregate: turn a fleet's raw results into one result a person can trust.

embed → exact-hash dedup → greedy leader clustering (cosine ≥ threshold, best member kept) →
categories → cross-fleet verification → results.jsonl, summary.json, report.md, report.html.

The default embedder is all-MiniLM-L6-v2 in numpy over the weights shipped in this package
(``minilm``); the lexical embedder and its index are pure Python, an explicit choice. numpy, the
sentence-transformers variant (``embed`` extra) and the faiss index (``index`` extra) are imported
only when used.

Every name is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_fleet._lazy import lazy_exports

if TYPE_CHECKING:
    from agent_fleet.aggregate.aggregator import (
        UNCATEGORIZED,
        AggregateConfig,
        AggregateStats,
        Aggregator,
        CategoryStats,
        Decision,
        DecisionKind,
    )
    from agent_fleet.aggregate.bands import CLAIMED_BANDS, BandCheck, TaskType, band_check, classify_task
    from agent_fleet.aggregate.categorize import CategoryNamer, ModelCategoryNamer, assign_categories
    from agent_fleet.aggregate.embedders import Embedder, LexicalEmbedder, SyncEmbedder, embed_sync
    from agent_fleet.aggregate.embedding_cache import EmbeddingCache
    from agent_fleet.aggregate.local import EmbedderUnavailable, MiniLMEmbedder, SentenceEmbedder, choose_embedder
    from agent_fleet.aggregate.members import corroboration
    from agent_fleet.aggregate.merge_scope import DedupScope, ItemIndex, dedup_rule, resolve_scope
    from agent_fleet.aggregate.outputs import sort_results, write_outputs
    from agent_fleet.aggregate.provider_embedder import EmbeddingsClient, ProviderEmbedder
    from agent_fleet.aggregate.text import content_hash, normalize_text
    from agent_fleet.aggregate.verify import (
        ModelVerifier,
        Verdict,
        VerdictKind,
        VerificationConfig,
        VerificationReport,
        Verifier,
        sample_for_verification,
        verify_results,
        wilson_interval,
    )

__all__ = [
    "CLAIMED_BANDS",
    "UNCATEGORIZED",
    "AggregateConfig",
    "AggregateStats",
    "Aggregator",
    "BandCheck",
    "CategoryNamer",
    "CategoryStats",
    "Decision",
    "DecisionKind",
    "DedupScope",
    "Embedder",
    "EmbedderUnavailable",
    "EmbeddingCache",
    "EmbeddingsClient",
    "ItemIndex",
    "LexicalEmbedder",
    "MiniLMEmbedder",
    "ModelCategoryNamer",
    "ModelVerifier",
    "ProviderEmbedder",
    "SentenceEmbedder",
    "SyncEmbedder",
    "TaskType",
    "Verdict",
    "VerdictKind",
    "VerificationConfig",
    "VerificationReport",
    "Verifier",
    "assign_categories",
    "band_check",
    "choose_embedder",
    "classify_task",
    "content_hash",
    "corroboration",
    "dedup_rule",
    "embed_sync",
    "normalize_text",
    "resolve_scope",
    "sample_for_verification",
    "sort_results",
    "verify_results",
    "wilson_interval",
    "write_outputs",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "CLAIMED_BANDS": "agent_fleet.aggregate.bands",
        "UNCATEGORIZED": "agent_fleet.aggregate.aggregator",
        "AggregateConfig": "agent_fleet.aggregate.aggregator",
        "AggregateStats": "agent_fleet.aggregate.aggregator",
        "Aggregator": "agent_fleet.aggregate.aggregator",
        "BandCheck": "agent_fleet.aggregate.bands",
        "CategoryNamer": "agent_fleet.aggregate.categorize",
        "CategoryStats": "agent_fleet.aggregate.aggregator",
        "Decision": "agent_fleet.aggregate.aggregator",
        "DecisionKind": "agent_fleet.aggregate.aggregator",
        "DedupScope": "agent_fleet.aggregate.merge_scope",
        "Embedder": "agent_fleet.aggregate.embedders",
        "EmbedderUnavailable": "agent_fleet.aggregate.local",
        "EmbeddingCache": "agent_fleet.aggregate.embedding_cache",
        "EmbeddingsClient": "agent_fleet.aggregate.provider_embedder",
        "ItemIndex": "agent_fleet.aggregate.merge_scope",
        "LexicalEmbedder": "agent_fleet.aggregate.embedders",
        "MiniLMEmbedder": "agent_fleet.aggregate.local",
        "ModelCategoryNamer": "agent_fleet.aggregate.categorize",
        "ModelVerifier": "agent_fleet.aggregate.verify",
        "ProviderEmbedder": "agent_fleet.aggregate.provider_embedder",
        "SentenceEmbedder": "agent_fleet.aggregate.local",
        "SyncEmbedder": "agent_fleet.aggregate.embedders",
        "TaskType": "agent_fleet.aggregate.bands",
        "Verdict": "agent_fleet.aggregate.verify",
        "VerdictKind": "agent_fleet.aggregate.verify",
        "VerificationConfig": "agent_fleet.aggregate.verify",
        "VerificationReport": "agent_fleet.aggregate.verify",
        "Verifier": "agent_fleet.aggregate.verify",
        "assign_categories": "agent_fleet.aggregate.categorize",
        "band_check": "agent_fleet.aggregate.bands",
        "choose_embedder": "agent_fleet.aggregate.local",
        "classify_task": "agent_fleet.aggregate.bands",
        "content_hash": "agent_fleet.aggregate.text",
        "corroboration": "agent_fleet.aggregate.members",
        "dedup_rule": "agent_fleet.aggregate.merge_scope",
        "embed_sync": "agent_fleet.aggregate.embedders",
        "normalize_text": "agent_fleet.aggregate.text",
        "resolve_scope": "agent_fleet.aggregate.merge_scope",
        "sample_for_verification": "agent_fleet.aggregate.verify",
        "sort_results": "agent_fleet.aggregate.outputs",
        "verify_results": "agent_fleet.aggregate.verify",
        "wilson_interval": "agent_fleet.aggregate.verify",
        "write_outputs": "agent_fleet.aggregate.outputs",
    },
)
