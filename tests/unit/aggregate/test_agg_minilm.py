"""all-MiniLM-L6-v2 in numpy (no torch): the GELU, padding and windows, the embedder's choice.

Agreement with sentence-transformers is checked in tests/integration/aggregate/test_aggregate_quality.py."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from agent_fleet.aggregate import choose_embedder
from agent_fleet.aggregate.embedders import LexicalEmbedder
from agent_fleet.aggregate.local import MiniLMEmbedder
from agent_fleet.aggregate.minilm import MODEL_DIR, EmbedderUnavailable, MiniLM, _gelu, map_safetensors, model_dir
from agent_fleet.aggregate.vectors import dot


@pytest.fixture(scope="module")
def emb() -> MiniLMEmbedder:
    e = MiniLMEmbedder(threads=2)
    e.load()
    return e


def test_gelu_is_the_erf_gelu_to_float32_precision() -> None:
    xs = np.linspace(-12, 12, 20001, dtype=np.float32)
    exact = np.array([0.5 * float(x) * (1.0 + math.erf(float(x) / math.sqrt(2.0))) for x in xs])
    got = _gelu(xs.copy().reshape(1, -1)).ravel().astype(np.float64)
    assert np.abs(got - exact).max() < 2e-6
    assert np.abs(got - 0.5 * xs * (1 + np.tanh(0.7978845608 * (xs + 0.044715 * xs**3)))).max() > 1e-4  # not tanh


def test_the_shipped_weights_are_found_and_fp32() -> None:
    assert model_dir() == MODEL_DIR
    model = MiniLM.load()
    assert model.word.dtype == np.float32 and model.word.shape == (30522, 384)
    assert len(model.layers) == 6


def test_the_memory_map_reads_what_safetensors_reads() -> None:
    st = pytest.importorskip("safetensors.numpy")
    ref = st.load_file(str(MODEL_DIR / "model.safetensors"))
    mapped = map_safetensors(MODEL_DIR / "model.safetensors")
    assert set(mapped) == {k for k, v in ref.items() if v.dtype == np.float32}
    for k, v in mapped.items():
        assert v.shape == ref[k].shape and np.array_equal(v, ref[k]), k


def test_padding_does_not_change_a_vector(emb: MiniLMEmbedder) -> None:
    short = "Mutable default argument in create_order shares one list across calls."
    long = "The pagination helper computes the last page with integer division and drops the remainder. " * 4
    alone = emb.encode([short])[0]
    batched = emb.encode([long, short, long + " again"])[1]  # padded to the longest of its batch
    assert dot(alone, batched) == pytest.approx(1.0, abs=1e-6)
    assert dot(alone, alone) == pytest.approx(1.0, abs=1e-5)


def test_similar_texts_are_close_and_different_ones_are_not(emb: MiniLMEmbedder) -> None:
    a, b, c = emb.encode(
        [
            "The login query concatenates user input into SQL, allowing injection.",
            "User input is concatenated into the SQL of the login query, so it can be injected.",
            "The image resizer loads whole files into memory and crashes on large uploads.",
        ]
    )
    assert dot(a, b) > 0.85
    assert dot(a, c) < 0.3


def test_a_long_text_is_embedded_whole_in_windows(emb: MiniLMEmbedder) -> None:
    model = emb.load()
    preamble = "This report lists every problem found in the files of this partition, ordered by severity. " * 16
    a = preamble + "The payment module retries failed charges without an idempotency key. " * 20
    b = preamble + "The image resizer crashes the worker on large uploads without a size limit. " * 20
    assert len(model.tokenize([a])[0].ids) > 2 * 254  # three windows
    first = model.embed_ids([model.tokenize([a])[0].ids[:254], model.tokenize([b])[0].ids[:254]])
    assert float(first[0] @ first[1]) > 0.95  # the first window alone: the shared preamble
    va, vb = emb.encode([a, b])
    assert dot(va, vb) < 0.95
    assert dot(va, va) == pytest.approx(1.0, abs=1e-5)


def test_empty_text_and_no_text(emb: MiniLMEmbedder) -> None:
    assert emb.encode([]) == []
    (v,) = emb.encode([""])
    assert dot(v, v) == pytest.approx(1.0, abs=1e-5)


def test_auto_is_the_numpy_model_and_lexical_stays_an_explicit_choice() -> None:
    auto = choose_embedder("auto")
    assert isinstance(auto, MiniLMEmbedder)
    assert auto.default_threshold == 0.95
    assert auto.name == "all-minilm-l6-v2-np-w254"
    assert isinstance(choose_embedder("minilm"), MiniLMEmbedder)
    assert isinstance(choose_embedder("lexical"), LexicalEmbedder)


def test_missing_model_files_fail_readably(tmp_path: Path) -> None:
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(MODEL_DIR / name, tmp_path / name)
    with pytest.raises(EmbedderUnavailable, match=r"model\.safetensors"):
        MiniLM.load(tmp_path)


def test_the_fast_embedder_is_the_same_model_in_int8(
    emb: MiniLMEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from agent_fleet.aggregate.local import FastMiniLMEmbedder
    from agent_fleet.aggregate.minilm_onnx import cache_dir

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    fast = choose_embedder("fast")
    assert isinstance(fast, FastMiniLMEmbedder) and fast.name != emb.name  # its own cache entries
    assert [p.suffix for p in cache_dir().iterdir()] == [".onnx"]  # built once from the shipped weights
    texts = [
        "The login query concatenates user input into SQL.",
        "SQL built by concatenating the user's input in the login query.",
        "The changelog lists three releases and their dates.",
        "word " * 600,  # windows, as the numpy model cuts them
    ]
    a, b = emb.encode(texts), fast.encode(texts)
    assert all(dot(x, y) > 0.97 for x, y in zip(a, b, strict=True))  # int8 weights: the same direction
    assert dot(b[0], b[1]) > dot(b[0], b[2]) + 0.3
