"""The model manifest (embedder.models): parsing, prefixes, and the checked jar fetch."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from embedder import build
from embedder.model import Embedder, read_manifest
from embedder.models import (
    DEFAULT_MODEL,
    E5_SMALL_V2,
    MINILM,
    MODELS,
    SIMILARITY_MODEL,
    ModelSpec,
    fetch_maven,
    model_dir,
    spec,
)
from processors.text.calibration import (
    CALIBRATIONS,
    DEFAULT_CALIBRATION,
    SIMILARITY,
    calibration_of,
)


def build_model(name: str) -> Path:
    """The model's folder, built by the set-up (python -m embedder.build --model NAME)."""
    assert build.main(["--model", name, "--no-fetch"]) == 0
    return model_dir(name)


def test_both_models_round_trip_through_json() -> None:
    for model in MODELS.values():
        assert ModelSpec.from_json(model.to_json()) == model


def test_minilm_spec_matches_the_build_constants() -> None:
    assert MINILM.sha256 == build.WHEEL_SHA256
    assert MINILM.package == build.WHEEL_REQUIREMENT
    assert MINILM.package_file == build.WHEEL_FILENAME
    assert MINILM.model_id == build.MODEL_ID
    assert MINILM.max_tokens == build.MAX_SEQ_LENGTH
    assert all(p.startswith(build.WHEEL_MODEL_PREFIX) for p in MINILM.files.values())


def test_prefixes() -> None:
    assert MINILM.prefixed(["a b"], "query") == ["a b"]
    assert MINILM.prefixed(["a b"], "passage") == ["a b"]
    assert E5_SMALL_V2.prefixed(["a", "b"], "query") == ["query: a", "query: b"]
    assert E5_SMALL_V2.prefixed(["a"], "passage") == ["passage: a"]
    with pytest.raises(ValueError):
        E5_SMALL_V2.prefixed(["a"], "document")  # type: ignore[arg-type]


@pytest.mark.parametrize("change", [
    {"pooling": "cls"}, {"registry": "npm"}, {"dimension": 0}, {"max_tokens": "512"},
    {"sha256": "ABC"},
])
def test_from_json_rejects_bad_values(change: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        ModelSpec.from_json({**E5_SMALL_V2.to_json(), **change})


def test_from_json_rejects_missing_and_unknown_keys() -> None:
    data = E5_SMALL_V2.to_json()
    del data["query_prefix"]
    with pytest.raises(ValueError, match="query_prefix"):
        ModelSpec.from_json(data)
    with pytest.raises(ValueError, match="extra"):
        ModelSpec.from_json({**E5_SMALL_V2.to_json(), "extra": 1})


def test_models_by_name_in_any_case() -> None:
    assert spec("e5-small-v2") is E5_SMALL_V2
    assert spec("ALL-minilm-L6-v2") is MINILM
    with pytest.raises(ValueError, match="known: all-MiniLM-L6-v2, e5-small-v2"):
        spec("bge")


def test_every_model_has_its_thresholds_measured_and_the_default_is_the_default() -> None:
    assert set(CALIBRATIONS) == set(MODELS)
    assert DEFAULT_CALIBRATION is CALIBRATIONS[DEFAULT_MODEL]
    assert SIMILARITY.model == SIMILARITY_MODEL in MODELS
    with pytest.raises(ValueError, match="measure it first"):
        calibration_of("bge-small-en-v1.5")


@pytest.fixture(scope="module")
def e5() -> Iterator[Embedder]:
    with Embedder.load(build_model("e5-small-v2"), "int8", threads=2) as embedder:
        yield embedder


def test_e5_sees_its_prefix_before_each_role(e5: Embedder) -> None:
    """A query is embedded as "query: <text>", a stored text as "passage: <text>"."""
    bare = Embedder(e5._session, e5._tokenizer,  # the same model, told of no prefix
                    spec=dataclasses.replace(E5_SMALL_V2, query_prefix="", passage_prefix=""),
                    model_id="bare", variant="int8", threads=1)
    text = "Deploys to staging need the office VPN."
    query, passage = e5.embed([text], role="query")[0], e5.embed([text], role="passage")[0]
    assert np.array_equal(query, bare.embed(["query: " + text], role="query")[0])
    assert np.array_equal(passage, bare.embed(["passage: " + text], role="passage")[0])
    assert float(query @ passage) < 0.999
    assert e5.spec == E5_SMALL_V2 and e5.max_tokens == 512 and e5.dimension == 384
    assert e5.model_id.startswith("e5-small-v2:int8@")


def test_a_model_folder_without_a_spec_is_refused(tmp_path: Path) -> None:
    (tmp_path / "model-int8.onnx").write_bytes(b"")
    (tmp_path / "manifest.json").write_text('{"model_id": "old"}')
    with pytest.raises(FileNotFoundError, match="no model spec"):
        read_manifest(tmp_path)


def test_fetch_maven_uses_a_checked_jar_already_there(tmp_path: Path) -> None:
    jar = tmp_path / "m.jar"
    jar.write_bytes(b"jar bytes")
    model = dataclasses.replace(E5_SMALL_V2, package_file="m.jar",
                                sha256=hashlib.sha256(b"jar bytes").hexdigest())
    assert fetch_maven(model, dest_dir=tmp_path, m2=tmp_path / "m2") == jar
    assert not (tmp_path / "m2").exists()  # no maven run


def test_fetch_maven_refuses_a_jar_with_another_checksum(tmp_path: Path) -> None:
    (tmp_path / "m.jar").write_bytes(b"other bytes")
    model = dataclasses.replace(E5_SMALL_V2, package_file="m.jar")
    with pytest.raises(ValueError, match="does not match"):
        fetch_maven(model, dest_dir=tmp_path, m2=tmp_path / "m2")
    assert (tmp_path / "m.jar").read_bytes() == b"other bytes"


def test_fetch_maven_only_for_maven_models(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="pypi"):
        fetch_maven(MINILM, dest_dir=tmp_path)
