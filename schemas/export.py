"""Export one JSON Schema per event type into `schemas/json/`.

`python -m schemas.export` rewrites the files; `python -m schemas.export --check` exits 1 if a
committed file differs from its model, so that the files never drift from the code.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from memstream_client.events import EVENT_TYPES, Envelope, MemoryUpdated

SCHEMA_DIR = Path(__file__).resolve().parent / "json"


def exported_models() -> dict[str, type[BaseModel]]:
    models: dict[str, type[BaseModel]] = {"envelope": Envelope, "memory.updated": MemoryUpdated}
    models.update(EVENT_TYPES)
    return models


def schema_text(model: type[BaseModel]) -> str:
    schema: dict[str, Any] = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def stale_files(directory: Path = SCHEMA_DIR) -> list[Path]:
    """The schema files whose committed text differs from their model's export."""
    return [
        path
        for name, model in exported_models().items()
        if not (path := directory / f"{name}.schema.json").exists()
        or path.read_text() != schema_text(model)
    ]


def write_all(directory: Path = SCHEMA_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, model in exported_models().items():
        path = directory / f"{name}.schema.json"
        path.write_text(schema_text(model))
        written.append(path)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if a file is out of date")
    args = parser.parse_args()
    if args.check:
        stale = stale_files()
        for path in stale:
            print(f"out of date: {path}", file=sys.stderr)
        return 1 if stale else 0
    for path in write_all():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
