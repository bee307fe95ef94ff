from pathlib import Path

from schemas.export import SCHEMA_DIR, exported_models, schema_text, stale_files, write_all


def test_committed_json_schemas_match_the_models() -> None:
    assert stale_files() == [], "run `make schemas` and commit schemas/json/"


def test_every_event_type_has_a_schema_file() -> None:
    names = {path.name for path in SCHEMA_DIR.glob("*.schema.json")}
    assert names == {f"{name}.schema.json" for name in exported_models()}


def test_a_changed_model_is_detected(tmp_path: Path) -> None:
    write_all(tmp_path)
    assert stale_files(tmp_path) == []
    target = tmp_path / "memory.write.schema.json"
    target.write_text(target.read_text().replace('"maxLength": 8000', '"maxLength": 9000'))
    assert stale_files(tmp_path) == [target]
    assert schema_text(exported_models()["memory.write"]) != target.read_text()
