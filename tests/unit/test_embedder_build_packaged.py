"""embedder.build_packaged.add_mean_pooling on a tiny graph: mean over the mask, then L2."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from embedder.build_packaged import add_mean_pooling  # noqa: E402


@pytest.mark.parametrize("opset", [11, 17])
def test_mean_pooling_over_the_mask_then_l2(opset: int) -> None:
    from onnx import TensorProto, helper

    # last_hidden_state = Cast(input_ids)[..., None] * w: a stand-in encoder, hidden size 2.
    w = onnx.numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "w")
    nodes = [helper.make_node("Cast", ["input_ids"], ["f"], to=TensorProto.FLOAT),
             (helper.make_node("Unsqueeze", ["f", "ax"], ["f3"]) if opset >= 13
              else helper.make_node("Unsqueeze", ["f"], ["f3"], axes=[2])),
             helper.make_node("Mul", ["f3", "w"], ["last_hidden_state"])]
    inits = [w] + ([onnx.numpy_helper.from_array(np.array([2], np.int64), "ax")]
                   if opset >= 13 else [])
    ins = [helper.make_tensor_value_info(n, TensorProto.INT64, ["b", "s"])
           for n in ("input_ids", "attention_mask")]
    out = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["b", "s", 2])
    model = helper.make_model(helper.make_graph(nodes, "t", ins, [out], inits),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    pooled = add_mean_pooling(model, 2)
    sess = ort.InferenceSession(pooled.SerializeToString(), providers=["CPUExecutionProvider"])
    ids = np.array([[3, 5, 100]], np.int64)
    mask = np.array([[1, 1, 0]], np.int64)
    (vec,) = sess.run(["sentence_embedding"], {"input_ids": ids, "attention_mask": mask})
    expected = np.array([4.0, 8.0]) / np.linalg.norm([4.0, 8.0])  # mean of 3 and 5, masked 100
    np.testing.assert_allclose(vec[0], expected, rtol=1e-6)
