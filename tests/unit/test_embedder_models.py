"""The model manifest (embedder.models): parsing, prefixes, and the checked jar fetch."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest

from embedder import build
from embedder.models import E5_SMALL_V2, MINILM, MODELS, ModelSpec, fetch_maven, spec


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


def test_unknown_model_name() -> None:
    assert spec("e5-small-v2") is E5_SMALL_V2
    with pytest.raises(KeyError, match="known"):
        spec("bge")


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
