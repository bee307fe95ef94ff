"""The OpenAPI document of the ingest app as it is wired (streams/app.py), without its
stores: it lists exactly the routes the app registers with its web server, each with the
parameters its route declares, and is a document a client generator can use. (The running
worker serves it and obeys it: tests/integration/test_openapi.py.)"""

from __future__ import annotations

from typing import Any

from tests.answers_check import DeclaredAnswers
from tests.openapi_structure import operations, structural_problems

# Methods aiohttp answers for every route by itself.
IMPLIED_METHODS = {"HEAD", "OPTIONS"}
BODY_METHODS = {"POST", "PUT", "PATCH"}


def test_the_document_lists_exactly_the_routes_the_app_registers(
        wired: tuple[Any, dict[str, Any]]) -> None:
    router, document = wired
    registered = {(route.method, route.resource.canonical) for route in router.routes()
                  if route.method not in IMPLIED_METHODS}
    described = {(method, path) for method, path, _ in operations(document)}
    assert described == registered
    assert ("GET", "/v1/openapi.json") in described
    assert len(described) > 30


def test_every_success_answer_is_declared(wired: tuple[Any, dict[str, Any]]) -> None:
    """A JSON answer names the schema of its model (memstream_client/answers/); a page, a script or
    metrics name their media types; a redirect has no body."""
    _, document = wired
    schemas = document["components"]["schemas"]
    for method, path, operation in operations(document):
        successes = {status: answer for status, answer in operation["responses"].items()
                     if status.startswith(("2", "3"))}
        if set(successes) == {"200", "202"}:
            # A write that waits for its outcome: decided (200) or pending (202), one model.
            assert successes["200"]["content"] == successes["202"]["content"], path
            del successes["200"]
        assert len(successes) == 1, f"{method} {path}: {sorted(successes)}"
        ((status, answer),) = successes.items()
        content = answer.get("content")
        if status.startswith("3"):
            assert content is None, f"{method} {path}"
            continue
        assert content, f"{method} {path} declares no answer"
        if "application/json" in content:
            # One model's, or one of several models' (a read by ids or a listing).
            schema = content["application/json"]["schema"]
            for one in schema.get("oneOf", [schema]):
                assert "$ref" in one, f"{method} {path} declares no model"
                model = schemas[one["$ref"].rsplit("/", 1)[-1]]
                assert model["type"] == "object" and model["properties"], f"{method} {path}"
        else:
            assert all(kind.startswith("text/") for kind in content), f"{method} {path}"
            assert path in {"/metrics", "/ui/", "/ui/{name}"}, f"{method} {path}"


def test_an_answer_that_drifts_from_its_declaration_is_named(
        wired: tuple[Any, dict[str, Any]]) -> None:
    declared = DeclaredAnswers(wired[1])
    operation = declared.operation_of("GET", "/v1/search")
    assert operation is not None
    answer = {"namespace": "a", "hits": [], "budget_exhausted": False}
    assert declared.problems(operation, 200, answer) == []
    assert declared.problems(operation, 200, {**answer, "undeclared": 1}) == [
        "GET /v1/search 200: the answer: Additional properties are not allowed ('undeclared' "
        "was unexpected)"]
    assert declared.problems(operation, 200, {"namespace": "a"})
    assert declared.problems(operation, 202, answer) == [
        "GET /v1/search 202: the status is not declared"]
    assert declared.operation_of("POST", "/v1/runs/events").template == "/v1/runs/events"
    assert declared.operation_of("GET", "/v1/runs/r-1").template == "/v1/runs/{run_id}"


def test_the_document_is_structurally_sound(wired: tuple[Any, dict[str, Any]]) -> None:
    _, document = wired
    assert structural_problems(document) == []


def test_every_write_describes_its_body_and_every_route_its_answers(
        wired: tuple[Any, dict[str, Any]]) -> None:
    _, document = wired
    for method, path, operation in operations(document):
        if method in BODY_METHODS:
            assert "requestBody" in operation, f"{method} {path} declares no body"
        open_route = path in {"/healthz", "/metrics", "/v1/openapi.json"} or \
            path.startswith("/ui")
        assert (operation["security"] == []) == open_route, f"{method} {path}"
        assert "400" in operation["responses"]
        if not open_route:
            assert {"401", "403", "503"} <= set(operation["responses"]), f"{method} {path}"


def test_search_lists_its_declared_filters_with_their_rules(
        wired: tuple[Any, dict[str, Any]]) -> None:
    _, document = wired
    parameters = {p["name"]: p for p in document["paths"]["/v1/search"]["get"]["parameters"]}
    assert {"namespace", "query", "limit", "tier", "tag", "since", "profile"} <= \
        set(parameters)
    assert parameters["tier"]["schema"]["type"] == "array"
    assert parameters["tier"]["schema"]["items"]["enum"] == ["active", "long_term",
                                                             "short_term"]
    assert parameters["limit"]["schema"]["type"] == "integer"
    assert parameters["limit"]["schema"]["minimum"] == 1


def test_the_memory_write_body_is_the_memory_write_event_schema(
        wired: tuple[Any, dict[str, Any]]) -> None:
    _, document = wired
    operation = document["paths"]["/v1/memories"]["post"]
    ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    body = document["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    assert body["required"] == ["namespace", "text"]
    assert body["properties"]["memory_type"]["enum"][0] == "lesson"
    assert "202" in operation["responses"]
