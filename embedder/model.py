"""Load an ONNX embedding model built by ``embedder.build`` and embed texts.

The model folder's manifest carries the model's spec (``embedder.models.ModelSpec``): its
token limit and the prefixes it wants before a stored text and before a query (e5-small-v2:
``passage: `` and ``query: ``), so every caller says which of the two it embeds.

Runtime dependencies: onnxruntime, tokenizers, numpy (no onnx, no torch, no downloads).

Batch-mate independence: the int8 model quantizes activations dynamically with one scale per
*input tensor*, so a text run inside a padded batch gets a vector that depends on its batch-mates
(measured: cosine to the same text run alone as low as 0.94, mean 0.991). ``embed`` therefore
runs every text on its own (batch of one, no padding) and gets its throughput from running
``threads`` single-threaded inferences side by side. The result for a text is bit-identical
whatever it is embedded with, and on a 2-core machine this is as fast as or faster than padded
batches (see docs/embedder.md).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
from tokenizers import Tokenizer

from embedder.build import FP32_FILE, INT8_FILE, MANIFEST_FILE, TOKENIZER_FILE
from embedder.models import ModelSpec, TextRole

Variant = Literal["int8", "fp32"]
FloatMatrix = npt.NDArray[np.float32]

_MODEL_FILES: dict[str, str] = {"int8": INT8_FILE, "fp32": FP32_FILE}


def default_threads() -> int:
    """CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def read_manifest(model_dir: Path) -> dict[str, Any]:
    """The manifest of a built model folder, with the model's spec."""
    path = Path(model_dir) / MANIFEST_FILE
    try:
        manifest: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise FileNotFoundError(f"{path}: {exc}; build the model with `python -m "
                                "embedder.build`") from exc
    if "spec" not in manifest:
        raise FileNotFoundError(f"{path} has no model spec (built by an older builder): "
                                "build it again with `python -m embedder.build`")
    return manifest


class Embedder:
    """Sentence embeddings (float32, L2-normalized, ``dimension`` wide) from texts.

    Thread-safe: ``embed`` may be called from several threads at once (e.g. through
    ``asyncio.to_thread``). Use :meth:`load`; call :meth:`close` (or use ``with``) to stop
    the worker threads.
    """

    def __init__(self, session: ort.InferenceSession, tokenizer: Tokenizer, *, spec: ModelSpec,
                 model_id: str, variant: Variant, threads: int) -> None:
        self._session = session
        self._tokenizer = tokenizer
        self._tokenizer_lock = threading.Lock()
        self._input_names = {i.name for i in session.get_inputs()}
        self._output_name = session.get_outputs()[0].name
        self.spec = spec
        self.dimension: int = spec.dimension
        self.model_id = model_id
        self.variant: Variant = variant
        self.threads = threads
        self.max_tokens = spec.max_tokens
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._closed = False

    @classmethod
    def load(cls, model_dir: Path, variant: Variant = "int8",
             threads: int | None = None) -> Embedder:
        """Load ``model-<variant>.onnx`` and ``tokenizer.json`` from ``model_dir``.

        ``threads``: how many texts are embedded at the same time, each on one core
        (onnxruntime ``intra_op_num_threads`` is 1 per inference); default: the CPUs available.
        """
        if variant not in _MODEL_FILES:
            raise ValueError(f"variant must be 'int8' or 'fp32', not {variant!r}")
        model_dir = Path(model_dir)
        model_path = model_dir / _MODEL_FILES[variant]
        if not model_path.is_file():
            raise FileNotFoundError(
                f"{model_path} not found: build it with `python -m embedder.build --out "
                f"{model_dir}`")
        lanes = default_threads() if threads is None else threads
        if lanes < 1:
            raise ValueError(f"threads must be >= 1, not {threads}")

        opts = ort.SessionOptions()
        # One core per inference: no thread-pool barriers inside a run (those stall badly on a
        # busy 2-core machine), parallelism comes from running `lanes` texts side by side.
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
        opts.log_severity_level = 3
        session = ort.InferenceSession(str(model_path), opts,
                                       providers=["CPUExecutionProvider"])

        manifest = read_manifest(model_dir)
        model = ModelSpec.from_json(manifest["spec"])
        tokenizer = Tokenizer.from_file(str(model_dir / TOKENIZER_FILE))
        tokenizer.enable_truncation(max_length=model.max_tokens)
        tokenizer.no_padding()
        digest = str(manifest["files"][_MODEL_FILES[variant]]["sha256"])[:12]
        return cls(session, tokenizer, spec=model, model_id=f"{model.name}:{variant}@{digest}",
                   variant=variant, threads=lanes)

    # ------------------------------------------------------------------ embedding

    def embed(self, texts: Sequence[str], *, role: TextRole) -> FloatMatrix:
        """Embed texts: float32 array (len(texts), dimension), rows L2-normalized.

        role: "passage" for what is stored, "query" for what is searched with; each gets the
        model's prefix for it. Each text is truncated to the model's token limit and run on its
        own, so its vector does not depend on the other texts of the call.
        """
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single str")
        texts = list(texts)
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(f"texts must be str, got {type(t).__name__}")
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        with self._tokenizer_lock:
            encodings = self._tokenizer.encode_batch(self.spec.prefixed(texts, role),
                                                     add_special_tokens=True)
        feeds = [self._feed(e.ids) for e in encodings]

        pool = self._executor() if len(feeds) > 1 and self.threads > 1 else None
        if pool is None:
            for i, feed in enumerate(feeds):
                out[i] = self._run(feed)
        else:
            # Longest first, so the lanes finish at about the same time.
            order = sorted(range(len(feeds)), key=lambda i: -feeds[i]["input_ids"].shape[1])
            for i, row in zip(order, pool.map(self._run, [feeds[i] for i in order]),
                              strict=True):
                out[i] = row
        return out

    def embed_one(self, text: str, *, role: TextRole) -> npt.NDArray[np.float32]:
        """One text's vector, shape (dimension,)."""
        row: npt.NDArray[np.float32] = self.embed([text], role=role)[0]
        return row

    def token_count(self, text: str) -> int:
        """Tokens the model sees for text (with [CLS]/[SEP], after truncation)."""
        with self._tokenizer_lock:
            return len(self._tokenizer.encode(text).ids)

    def token_costs(self, texts: Sequence[str]) -> list[int]:
        """The model's tokens in each whole text (no truncation, no special tokens): what a
        text costs in a prompt measured by this model's vocabulary."""
        with self._tokenizer_lock:
            self._tokenizer.no_truncation()
            try:
                encoded = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
            finally:
                self._tokenizer.enable_truncation(max_length=self.max_tokens)
        return [len(encoding.ids) for encoding in encoded]

    def _feed(self, ids: list[int]) -> dict[str, npt.NDArray[np.int64]]:
        input_ids = np.asarray(ids, dtype=np.int64).reshape(1, -1)
        feed = {"input_ids": input_ids, "attention_mask": np.ones_like(input_ids)}
        if "token_type_ids" in self._input_names:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        return feed

    def _run(self, feed: dict[str, npt.NDArray[np.int64]]) -> npt.NDArray[np.float32]:
        result = self._session.run([self._output_name], feed)[0]
        row: npt.NDArray[np.float32] = np.asarray(result, dtype=np.float32)[0]
        return row

    def _executor(self) -> ThreadPoolExecutor | None:
        with self._pool_lock:
            if self._closed:
                return None
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.threads,
                                                thread_name_prefix="embedder")
            return self._pool

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Stop the worker threads; later calls still work, one text after the other."""
        with self._pool_lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def __enter__(self) -> Embedder:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Embedder(model_id={self.model_id!r}, dimension={self.dimension}, "
                f"threads={self.threads})")
