"""`GET /v1/openapi.json` on the real worker: served without a key, structurally sound, the
same through the SDK, and obeyed: every operation it lists is served with that method, and
takes exactly the query parameters it lists (the page frame names them when it refuses one
it does not take, before any view runs)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from harness.stack import Worker
from memstream_client.sdk import AsyncMemoryClient
from tests.openapi_structure import operations, structural_problems

pytestmark = pytest.mark.integration

# A value each path segment's rule takes (checked against the document's schema below).
SEGMENT_SAMPLES = {"key_id": "0123456789ab", "label": "persona", "name": "index.html"}
UNDECLARED = "not_a_parameter"


@pytest.fixture(scope="module")
async def document(worker: Worker) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=worker.base_url, timeout=20) as http:
        answer = await http.get("/v1/openapi.json")
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


async def test_the_document_is_served_openly_and_is_structurally_sound(
        document: dict[str, Any]) -> None:
    assert structural_problems(document) == []
    assert document["paths"]["/v1/openapi.json"]["get"]["security"] == []
    assert document["paths"]["/v1/search"]["get"]["security"] == [{"bearerKey": []}]


async def test_the_sdk_reads_the_same_document(worker: Worker,
                                               document: dict[str, Any]) -> None:
    async with AsyncMemoryClient(worker.base_url, key=worker.api_key, env={}) as memory:
        assert await memory.openapi() == document


async def test_every_listed_operation_is_served_with_exactly_its_listed_parameters(
        worker: Worker, document: dict[str, Any]) -> None:
    listed = list(operations(document))
    assert len(listed) > 30
    async with httpx.AsyncClient(base_url=worker.base_url, headers=worker.headers,
                                 timeout=30) as http:
        for method, path, operation in listed:
            parameters = operation["parameters"]
            url = path
            for parameter in parameters:
                if parameter["in"] == "path":
                    url = url.replace(f"{{{parameter['name']}}}", sample(parameter))
            query = sorted(p["name"] for p in parameters if p["in"] == "query")
            answer = await http.request(method, url, params={UNDECLARED: "1"})
            where = f"{method} {path}"
            assert answer.status_code == 400, f"{where}: {answer.status_code} {answer.text}"
            takes = (f"this route takes {', '.join(query)}" if query
                     else "this route takes no query parameters")
            assert answer.json()["error"] == f"unknown parameter {UNDECLARED!r}; {takes}", where


def sample(parameter: dict[str, Any]) -> str:
    """A value of the segment that its documented schema takes."""
    value = SEGMENT_SAMPLES.get(parameter["name"], "x1")
    assert Draft202012Validator(parameter["schema"]).is_valid(value), \
        f"add a sample of the path segment {parameter['name']} to SEGMENT_SAMPLES"
    return value
