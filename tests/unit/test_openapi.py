"""The OpenAPI document built from route declarations (processors/api/openapi.py): parameters
from their rules, bodies from the events' JSON Schemas, the key's security and the error
answers, in a document a client generator can use."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from memstream_client.answers.base import Answer
from memstream_client.answers.operations import KeyList, MadeKey
from memstream_client.answers.records import RecordBatch, RecordLineage, RecordList
from memstream_client.answers.runs import RunEventAccepted
from memstream_client.answers.status import Health
from memstream_client.answers.writes import ChangeAccepted
from memstream_client.events import MemoryUpdate, MemoryWrite, RunFinished, RunStarted
from processors.api.openapi import (
    OneOf,
    Parameter,
    Raw,
    Route,
    event_body,
    openapi_document,
    operation_id,
    payload_body,
)
from processors.api.parameters import IDENTIFIER, NAMESPACE, integer, one_of
from tests.openapi_structure import operations, structural_problems

READ = Route("/v1/records/{record_id}", ("GET",), (
    Parameter("namespace", NAMESPACE.schema), Parameter("record_id", IDENTIFIER.schema),
    Parameter("limit", integer(1, 50).schema),
    Parameter("tier", one_of(["active", "long_term"]).schema, repeats=True)),
    {"GET": RecordLineage}, summary="One record.")
UPDATE = Route("/v1/memories/{record_id}/update", ("POST",),
               (Parameter("record_id", IDENTIFIER.schema),), {"POST": ChangeAccepted},
               payload_body(MemoryUpdate, filled={"record_id"}))
RUNS = Route("/v1/runs/events", ("POST",), (), {"POST": RunEventAccepted},
             event_body("RunEventBody", [RunStarted, RunFinished]))
HEALTH = Route("/healthz", ("GET",), (), {"GET": Health}, public=True)
METRICS = Route("/metrics", ("GET",), (), {"GET": Raw(("text/plain",))}, public=True)
UI = Route("/ui", ("GET",), (), {"GET": Raw((), status=308)}, public=True)


def document(*routes: Route) -> dict[str, Any]:
    return openapi_document(routes, title="memstream", description="test")


def body_validator(built: dict[str, Any], path: str) -> Draft202012Validator:
    """A validator of the POST body of `path`, its references resolved in `built`."""
    ref = built["paths"][path]["post"]["requestBody"]["content"]["application/json"][
        "schema"]["$ref"]
    registry: Registry[Any] = Registry().with_resource("urn:openapi", Resource.opaque(built))
    return Draft202012Validator({"$ref": f"urn:openapi{ref}"}, registry=registry)


def test_a_document_of_every_kind_of_route_is_structurally_sound() -> None:
    built = document(READ, UPDATE, RUNS, HEALTH)
    assert structural_problems(built) == []
    assert built["openapi"] == "3.1.0"
    assert [(method, path) for method, path, _ in operations(built)] == [
        ("GET", "/v1/records/{record_id}"), ("POST", "/v1/memories/{record_id}/update"),
        ("POST", "/v1/runs/events"), ("GET", "/healthz")]


def test_parameters_carry_their_rules() -> None:
    parameters = {p["name"]: p for p in document(READ)["paths"]["/v1/records/{record_id}"][
        "get"]["parameters"]}
    assert parameters["record_id"] == {"name": "record_id", "in": "path", "required": True,
                                       "schema": {"type": "string", "minLength": 1,
                                                  "maxLength": 200}}
    assert parameters["namespace"]["in"] == "query"
    assert parameters["namespace"]["required"] is False
    assert parameters["namespace"]["schema"]["pattern"].startswith("^[A-Za-z0-9]")
    assert parameters["limit"]["schema"] == {"type": "integer", "minimum": 1, "maximum": 50}
    # A repeating parameter is a list, given as the server takes it: tier=a&tier=b.
    assert parameters["tier"] == {
        "name": "tier", "in": "query", "required": False, "style": "form", "explode": True,
        "schema": {"type": "array", "items": {"type": "string",
                                              "enum": ["active", "long_term"]}}}


def test_keyed_routes_need_the_bearer_key_and_public_ones_none() -> None:
    built = document(READ, HEALTH)
    scheme = built["components"]["securitySchemes"]["bearerKey"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    read = built["paths"]["/v1/records/{record_id}"]["get"]
    health = built["paths"]["/healthz"]["get"]
    assert read["security"] == [{"bearerKey": []}]
    assert {"400", "401", "403", "404", "503"} <= set(read["responses"])
    assert health["security"] == []
    assert set(health["responses"]) == {"200", "400"}


def test_a_publishing_route_answers_202_and_503_with_the_event_id_to_retry_with() -> None:
    built = document(UPDATE, RUNS)
    answers = built["paths"]["/v1/memories/{record_id}/update"]["post"]["responses"]
    # A write that waits for its outcome answers 200 once decided, 202 while pending; one
    # that does not (a run event) answers 202 alone.
    assert answers["200"]["content"] == answers["202"]["content"]
    assert set(built["paths"]["/v1/runs/events"]["post"]["responses"]) & {"200", "202"} == {
        "202"}
    assert answers["503"] == {"$ref": "#/components/responses/NotPublished"}
    retry = built["components"]["schemas"]["NotPublished"]
    assert "event_id" in retry["properties"]
    rejected = built["components"]["schemas"]["Rejected"]
    assert set(rejected["properties"]) == {"error", "reason"}


def test_a_payload_body_is_the_payload_beside_namespace_and_event_id() -> None:
    body = payload_body(MemoryWrite).schema
    assert body["required"][0] == "namespace"
    assert "text" in body["required"]
    assert {"namespace", "event_id", "text", "tags", "scope"} <= set(body["properties"])
    assert not {"payload", "type", "producer", "occurred_at"} & set(body["properties"])
    assert body["additionalProperties"] is False


def test_a_route_filled_field_is_no_body_field_and_an_optional_one_is_not_required() -> None:
    update = payload_body(MemoryUpdate, filled={"record_id"},
                          optional={"expected_version"},
                          extra={"budget_tokens": integer(0, 9).schema})
    assert "record_id" not in update.schema["properties"]
    assert "expected_version" in update.schema["properties"]
    assert "expected_version" not in update.schema["required"]
    assert update.schema["properties"]["budget_tokens"]["maximum"] == 9
    assert (update.name, update.status, update.publishes) == ("MemoryUpdateBody", 202, True)


def test_bodies_validate_what_the_route_takes_and_refuse_what_it_refuses() -> None:
    built = document(UPDATE, RUNS)
    update = body_validator(built, "/v1/memories/{record_id}/update")
    assert update.is_valid({"namespace": "acme", "expected_version": 2, "text": "new"})
    assert not update.is_valid({"namespace": "acme", "text": "no version"})
    assert not update.is_valid({"namespace": "acme", "expected_version": 2,
                                "record_id": "mem_1"})
    runs = body_validator(built, "/v1/runs/events")
    started = {"type": "run.started", "namespace": "acme",
               "payload": {"run_id": "r1", "agent": "coder", "intent": "fix the build"}}
    assert runs.is_valid(started), list(runs.iter_errors(started))
    # The producer is the key's; the id and the time are filled when not given.
    assert not runs.is_valid({**started, "producer": "me"})
    assert not runs.is_valid({**started, "type": "run.unknown"})


@pytest.mark.parametrize(("method", "path", "expected"), [
    ("GET", "/v1/records/{record_id}", "get_v1_records_record_id"),
    ("POST", "/v1/runs/events", "post_v1_runs_events"),
    ("GET", "/ui", "get_ui"),
    ("GET", "/ui/", "get_ui_index"),
    ("GET", "/", "get_root"),
])
def test_operation_ids_name_the_method_and_path(method: str, path: str, expected: str) -> None:
    assert operation_id(method, path) == expected


def test_a_route_of_two_methods_is_one_path_of_two_operations() -> None:
    both = Route("/v1/keys", ("GET", "POST"), (Parameter("namespace", NAMESPACE.schema),),
                 {"GET": KeyList, "POST": MadeKey}, payload_body(MemoryWrite))
    built = document(both)
    get, post = built["paths"]["/v1/keys"]["get"], built["paths"]["/v1/keys"]["post"]
    assert "requestBody" not in get and "requestBody" in post
    assert get["operationId"] != post["operationId"]
    assert structural_problems(built) == []


def test_each_answer_is_the_schema_of_its_model_as_serialized() -> None:
    built = document(READ, UPDATE, HEALTH, METRICS, UI)
    assert structural_problems(built) == []
    paths, schemas = built["paths"], built["components"]["schemas"]
    read = paths["/v1/records/{record_id}"]["get"]["responses"]["200"]["content"]
    assert read == {"application/json": {"schema": {
        "$ref": "#/components/schemas/RecordLineage"}}}
    # What it references is there too; a moment is written as a string.
    assert schemas["RecordView"]["properties"]["created_at"] == {
        "format": "date-time", "title": "Created At", "type": "string"}
    assert "202" in paths["/v1/memories/{record_id}/update"]["post"]["responses"]
    assert paths["/metrics"]["get"]["responses"]["200"]["content"] == {
        "text/plain": {"schema": {"type": "string"}}}
    assert "content" not in paths["/ui"]["get"]["responses"]["308"]


def test_an_answer_of_one_model_or_another_references_both() -> None:
    read = Route("/v1/records", ("GET",), (), {"GET": OneOf((RecordBatch, RecordList))})
    built = document(read)
    assert structural_problems(built) == []
    content = built["paths"]["/v1/records"]["get"]["responses"]["200"]["content"]
    assert content == {"application/json": {"schema": {"oneOf": [
        {"$ref": "#/components/schemas/RecordBatch"},
        {"$ref": "#/components/schemas/RecordList"}]}}}
    assert {"RecordBatch", "RecordList", "StoredRecord", "RecordSummary"} <= set(
        built["components"]["schemas"])


def test_two_models_of_one_name_cannot_both_be_described() -> None:
    class ChangeAccepted(Answer):
        elsewhere: int

    twin = Route("/v1/twin", ("GET",), (), {"GET": ChangeAccepted})
    with pytest.raises(ValueError, match="two schemas are named 'ChangeAccepted'"):
        document(UPDATE, twin)
