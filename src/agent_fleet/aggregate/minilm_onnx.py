"""all-MiniLM-L6-v2 through ONNX Runtime, its weights quantised to int8: the ``fast`` embedder option.

The graph is built here from the same shipped safetensors weights the numpy forward pass reads
(:mod:`agent_fleet.aggregate.minilm`) — word, position and token-type embeddings, six post-norm encoder
layers with exact erf GELU — and its matrix weights are quantised to int8 by ONNX Runtime's dynamic
quantisation (activations quantised per call). Nothing is downloaded: the model file is made once, in
a few seconds, and kept in the user's cache directory (``$XDG_CACHE_HOME/agent-fleet``), keyed by a
hash of the weights. Tokenising, windows and mean pooling are the numpy embedder's own, so only the
encoder differs; its precision and recall on the labelled pairs are printed beside the numpy model's
by ``benchmarks/aggregate.py fast``.

Needs the ``fast-embed`` extra (onnx to build the graph, onnxruntime to run it).
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any

from agent_fleet.aggregate.minilm import EmbedderUnavailable, MiniLM

__all__ = ["OnnxMiniLM", "build_graph", "cache_dir"]

_LOCK = threading.Lock()
_SESSIONS: dict[str, Any] = {}


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agent-fleet"


def build_graph(model: MiniLM) -> Any:
    """The encoder as an ONNX model (opset 17): ``ids`` int64 [batch, length] and ``mask`` float32 [batch,
    length] in, the last hidden states float32 [batch, length, 384] out."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    nodes: list[Any] = []
    inits: list[Any] = []
    count = [0]

    named: set[str] = set()

    def const(name: str, value: Any) -> str:
        if name not in named:  # a constant used twice is one initializer
            named.add(name)
            inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(kind: str, inputs: list[str], **attrs: Any) -> str:
        count[0] += 1
        out = f"{kind.lower()}_{count[0]}"
        nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    f32 = np.float32
    hidden, heads = model.hidden, model.heads
    hd = hidden // heads

    def layer_norm(x: str, w: Any, prefix: str) -> str:
        g = const(prefix + ".g", np.asarray(w[0], dtype=f32))
        b = const(prefix + ".b", np.asarray(w[1], dtype=f32))
        return op("LayerNormalization", [x, g, b], axis=-1, epsilon=model.eps)

    x = op("Gather", [const("word", np.asarray(model.word, dtype=f32)), "ids"])
    length = op("Slice", [op("Shape", ["ids"]), const("one", np.array([1])), const("two", np.array([2]))])
    pos = op(
        "Slice", [const("position", model.position), const("zero", np.array([0])), length, const("zero", np.array([0]))]
    )
    x = layer_norm(op("Add", [x, pos]), model.emb_norm, "emb")
    keep = op("Sub", [const("f_one", np.array(1.0, dtype=f32)), "mask"])
    bias = op(
        "Unsqueeze", [op("Mul", [keep, const("neg", np.array(-1e4, dtype=f32))]), const("axes12", np.array([1, 2]))]
    )
    split = const("split", np.array([hidden, hidden, hidden]))
    head_shape = const("head_shape", np.array([0, 0, heads, hd]))
    flat = const("flat", np.array([0, 0, hidden]))
    scale = const("scale", np.array(1.0 / np.sqrt(hd), dtype=f32))
    half = const("half", np.array(0.5, dtype=f32))
    root = const("inv_sqrt2", np.array(1.0 / np.sqrt(2.0), dtype=f32))
    for i, w in enumerate(model.layers):
        p = f"l{i}"
        qkv = op(
            "Add",
            [op("MatMul", [x, const(p + ".qkv", np.asarray(w["qkv"], dtype=f32))]), const(p + ".qkv_b", w["qkv_b"])],
        )
        count[0] += 1
        q, k, v = (f"split_{count[0]}_{n}" for n in "qkv")
        nodes.append(helper.make_node("Split", [qkv, split], [q, k, v], axis=2))
        q = op("Transpose", [op("Reshape", [q, head_shape])], perm=[0, 2, 1, 3])
        k = op("Transpose", [op("Reshape", [k, head_shape])], perm=[0, 2, 3, 1])
        v = op("Transpose", [op("Reshape", [v, head_shape])], perm=[0, 2, 1, 3])
        scores = op("Add", [op("Mul", [op("MatMul", [q, k]), scale]), bias])
        ctx = op("MatMul", [op("Softmax", [scores], axis=-1), v])
        ctx = op("Reshape", [op("Transpose", [ctx], perm=[0, 2, 1, 3]), flat])
        attn = op(
            "Add",
            [op("MatMul", [ctx, const(p + ".out", np.asarray(w["out"], dtype=f32))]), const(p + ".out_b", w["out_b"])],
        )
        x1 = layer_norm(op("Add", [attn, x]), w["norm1"], p + ".n1")
        h = op(
            "Add",
            [
                op("MatMul", [x1, const(p + ".inter", np.asarray(w["inter"], dtype=f32))]),
                const(p + ".inter_b", w["inter_b"]),
            ],
        )
        gelu = op(
            "Mul",
            [
                op("Mul", [h, half]),
                op("Add", [op("Erf", [op("Mul", [h, root])]), const(p + ".one", np.array(1.0, dtype=f32))]),
            ],
        )
        y = op(
            "Add",
            [
                op("MatMul", [gelu, const(p + ".down", np.asarray(w["down"], dtype=f32))]),
                const(p + ".down_b", w["down_b"]),
            ],
        )
        x = layer_norm(op("Add", [y, x1]), w["norm2"], p + ".n2")
    nodes.append(helper.make_node("Identity", [x], ["hidden"]))
    graph = helper.make_graph(
        nodes,
        "all-minilm-l6-v2",
        [
            helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "length"]),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "length"]),
        ],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "length", hidden])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


class OnnxMiniLM:
    """The int8 encoder's session: ``embed_ids`` as :meth:`MiniLM.embed_ids` (unit vectors per window)."""

    def __init__(self, model: MiniLM) -> None:
        self.model = model
        self.session = self._session()

    def _model_file(self) -> Path:
        weights = self.model.folder / "model.safetensors"
        stat = weights.stat()
        key = hashlib.blake2b(f"{weights.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode(), digest_size=8)
        return cache_dir() / f"all-minilm-l6-v2-int8-{key.hexdigest()}.onnx"

    def _session(self) -> Any:
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise EmbedderUnavailable(
                "the fast embedder needs the fast-embed extra: pip install 'agent-fleet-manager[fast-embed]'"
            ) from exc
        path = self._model_file()
        with _LOCK:
            session = _SESSIONS.get(str(path))
            if session is not None:
                return session
            if not path.is_file():
                self._write(path)
            opts = ort.SessionOptions()
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            opts.log_severity_level = 3
            session = _SESSIONS[str(path)] = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
            return session

    def _write(self, path: Path) -> None:
        """Build the fp32 graph, quantise its weights to int8, and keep the result (atomically)."""
        try:
            import onnx
            from onnxruntime.quantization import QuantType, quantize_dynamic
        except ImportError as exc:
            raise EmbedderUnavailable(
                "the fast embedder needs the fast-embed extra: pip install 'agent-fleet-manager[fast-embed]'"
            ) from exc
        path.parent.mkdir(parents=True, exist_ok=True)
        fp32 = path.with_name(f"{path.stem}.fp32.{os.getpid()}.onnx")
        tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.onnx")
        try:
            onnx.save(build_graph(self.model), str(fp32))
            quantize_dynamic(str(fp32), str(tmp), weight_type=QuantType.QInt8, per_channel=True, reduce_range=True)
            os.replace(tmp, path)
        finally:
            for f in (fp32, tmp):
                f.unlink(missing_ok=True)

    def embed_ids(self, windows: list[list[int]], *, max_tokens: int = 4096) -> Any:
        import numpy as np

        m = self.model
        out = np.zeros((len(windows), m.hidden), dtype=np.float32)
        order = sorted(range(len(windows)), key=lambda i: len(windows[i]))
        start = 0
        while start < len(order):
            longest = len(windows[order[min(len(order) - 1, start + 255)]]) + 2
            size = max(1, min(256, max_tokens // longest, len(order) - start))
            batch = order[start : start + size]
            start += size
            length = max(len(windows[i]) for i in batch) + 2
            ids = np.zeros((len(batch), length), dtype=np.int64)
            mask = np.zeros((len(batch), length), dtype=np.float32)
            for row, i in enumerate(batch):
                w = windows[i]
                ids[row, 0], ids[row, 1 : len(w) + 1], ids[row, len(w) + 1] = m.cls_id, w, m.sep_id
                mask[row, : len(w) + 2] = 1.0
            (hidden,) = self.session.run(["hidden"], {"ids": ids, "mask": mask})
            pooled = np.einsum("nl,nld->nd", mask, hidden) / mask.sum(axis=1, keepdims=True)
            out[batch] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), np.float32(1e-12))
        return out
