"""A plain numpy reimplementation of BERT + mean pooling + L2 normalize (float64).

Used only to check that the ONNX graph written by ``embedder.build`` computes what
sentence-transformers computes from the same weights (there is no torch here). Slow, clear,
written straight from the BertModel source; not used at run time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from embedder.build import ATTENTION_MASK_BIAS, BertConfig

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


def _erf(x: F64) -> F64:
    from math import erf

    out: F64 = np.vectorize(erf, otypes=[np.float64])(x)
    return out


def _layer_norm(x: F64, w: F64, b: F64, eps: float) -> F64:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    out: F64 = (x - mu) / np.sqrt(var + eps) * w + b
    return out


def _softmax(x: F64) -> F64:
    e = np.exp(x - x.max(-1, keepdims=True))
    out: F64 = e / e.sum(-1, keepdims=True)
    return out


def reference_embed(
    weights: Mapping[str, npt.NDArray[np.float32]],
    cfg: BertConfig,
    input_ids: I64,
    attention_mask: I64,
    token_type_ids: I64 | None = None,
) -> F64:
    """Sentence embeddings (batch, hidden), L2-normalized, computed in float64."""
    w = {k: v.astype(np.float64) for k, v in weights.items()}
    bsz, seq = input_ids.shape
    if token_type_ids is None:
        token_type_ids = np.zeros_like(input_ids)
    h, d = cfg.num_heads, cfg.head_size

    x = (w["embeddings.word_embeddings.weight"][input_ids]
         + w["embeddings.token_type_embeddings.weight"][token_type_ids]
         + w["embeddings.position_embeddings.weight"][np.arange(seq)][None])
    x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"],
                    cfg.layer_norm_eps)
    mask = attention_mask.astype(np.float64)
    bias = ((1.0 - mask) * ATTENTION_MASK_BIAS)[:, None, None, :]

    def lin(t: F64, name: str) -> F64:
        out: F64 = t @ w[f"{name}.weight"].T + w[f"{name}.bias"]
        return out

    for i in range(cfg.num_layers):
        p = f"encoder.layer.{i}"
        q = lin(x, f"{p}.attention.self.query").reshape(bsz, seq, h, d).transpose(0, 2, 1, 3)
        k = lin(x, f"{p}.attention.self.key").reshape(bsz, seq, h, d).transpose(0, 2, 1, 3)
        v = lin(x, f"{p}.attention.self.value").reshape(bsz, seq, h, d).transpose(0, 2, 1, 3)
        probs = _softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + bias)
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(bsz, seq, h * d)
        x = _layer_norm(lin(ctx, f"{p}.attention.output.dense") + x,
                        w[f"{p}.attention.output.LayerNorm.weight"],
                        w[f"{p}.attention.output.LayerNorm.bias"], cfg.layer_norm_eps)
        inter = lin(x, f"{p}.intermediate.dense")
        inter = inter * 0.5 * (1.0 + _erf(inter / math.sqrt(2.0)))
        x = _layer_norm(lin(inter, f"{p}.output.dense") + x,
                        w[f"{p}.output.LayerNorm.weight"], w[f"{p}.output.LayerNorm.bias"],
                        cfg.layer_norm_eps)

    summed = (x * mask[:, :, None]).sum(1)
    mean = summed / np.maximum(mask.sum(1, keepdims=True), 1e-9)
    norm = np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)
    out: F64 = mean / norm
    return out
