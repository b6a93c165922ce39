"""Aggregate: turn a fleet's raw results into one result a person can trust.

embed → exact-hash dedup → greedy leader clustering (cosine ≥ threshold, best member kept) →
categories → cross-fleet verification → results.jsonl, summary.json, report.md, report.html.

Nothing here needs numpy: the lexical embedder and its index are pure Python. The local model
(``embed`` extra) and the faiss index (``index`` extra) are imported only when used.
"""

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
from agent_fleet.aggregate.cache import EmbeddingCache
from agent_fleet.aggregate.categorize import CategoryNamer, ModelCategoryNamer, assign_categories
from agent_fleet.aggregate.embedders import Embedder, LexicalEmbedder, SyncEmbedder, embed_sync
from agent_fleet.aggregate.local import EmbedderUnavailable, SentenceEmbedder, choose_embedder
from agent_fleet.aggregate.remote import EmbeddingsClient, HttpEmbeddingsClient, ProviderEmbedder
from agent_fleet.aggregate.report import sort_results, write_outputs
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
    "Embedder",
    "EmbedderUnavailable",
    "EmbeddingCache",
    "EmbeddingsClient",
    "HttpEmbeddingsClient",
    "LexicalEmbedder",
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
    "embed_sync",
    "normalize_text",
    "sample_for_verification",
    "sort_results",
    "verify_results",
    "wilson_interval",
    "write_outputs",
]
