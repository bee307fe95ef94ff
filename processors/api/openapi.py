"""The OpenAPI 3.1 document of the HTTP API, built from what each route declares when it is
registered (streams/api/pages.py): its methods, the rules of its path segments and query
parameters (processors/api/parameters.py), the body it takes, and whether it needs a key. Nothing
here is a hand-written copy of a route, so that the document cannot drift from the routes.

A body a route publishes as an event is described by that event's JSON Schema (the models of
memstream_client/events.py that schemas/json/ exports): the payload's fields beside the envelope's
`namespace` and `event_id`, less the fields the route fills itself (from its path or the
key). What a route answers on success is the JSON Schema of the answer model it declares
(memstream_client/answers/, as the worker serializes it: the models the SDK reads too), or, for a
page, a script or metrics, its media types. Its error answers are described by their
shapes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from memstream_client.answers.writes import Waited

OPENAPI_VERSION = "3.1.0"
# The API's version, which its paths carry (/v1/...).
API_VERSION = "1"
# Where the document keeps the schemas that references name.
REFERENCE = "#/components/schemas/{model}"
# The envelope fields a caller of a write route may give: the rest the route fills.
CALLER_ENVELOPE_FIELDS = ("namespace", "event_id")
# Envelope fields of a posted event that the route fills when they are not given.
FILLED_WHEN_ABSENT = frozenset({"event_id", "occurred_at"})
# The envelope field a route always fills from the key.
FILLED_FROM_KEY = "producer"
SECURITY_SCHEME = "bearerKey"
# The methods whose requests carry a route's body.
_TAKES_BODY = frozenset({"POST", "PUT", "PATCH"})
_PATH_NAME = re.compile(r"\{(\w+)\}")
_NOT_A_NAME = re.compile(r"[^A-Za-z0-9]+")


@dataclass(frozen=True)
class Parameter:
    """A path segment or query parameter: its name, the JSON Schema of one value, and
    whether it may be given more than once (each time a comma-separated list)."""

    name: str
    schema: Mapping[str, Any]
    repeats: bool = False


@dataclass(frozen=True)
class Body:
    """A route's JSON body: its schema (named `name` in the document), the schemas its
    references name, the status of its success, and whether the route publishes it as an
    event, so that it answers 503 while Kafka is away."""

    name: str
    schema: Mapping[str, Any]
    definitions: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    status: int = 200
    publishes: bool = False


@dataclass(frozen=True)
class Raw:
    """An answer that is no JSON object: content of these media types (a page, a script,
    Prometheus' exposition format), or none (a redirect, with its own `status`)."""

    media_types: tuple[str, ...]
    status: int | None = None


@dataclass(frozen=True)
class OneOf:
    """An answer that is one model or another, as the request asks: a read by ids or a
    listing, which one route serves (each model names fields the other lacks)."""

    models: tuple[type[BaseModel], ...]


# What a method of a route answers on success: a model's JSON, one of several models', or
# raw content.
Answered = type[BaseModel] | OneOf | Raw


@dataclass(frozen=True)
class Route:
    """A route as it is registered: its path template (`/v1/records/{record_id}`), methods,
    the parameters it takes (its path segments among them), what each method answers on
    success, its body if it takes one, what its handler says of itself, and whether it
    answers without a key."""

    path: str
    methods: tuple[str, ...]
    parameters: tuple[Parameter, ...]
    answers: Mapping[str, Answered]
    body: Body | None = None
    summary: str = ""
    public: bool = False

    def waits(self, method: str) -> bool:
        """Whether the method publishes writes and may wait for their outcome: answered 200
        once decided within the wait, else with its status of success (202)."""
        answered = self.answers[method]
        return self.body is not None and self.body.publishes and method in _TAKES_BODY \
            and isinstance(answered, type) and issubclass(answered, Waited)

    def success(self, method: str) -> int:
        """The status of the method's answer on success: a redirect's own, its body's (a
        write that publishes answers 202), else 200."""
        answered = self.answers[method]
        if isinstance(answered, Raw) and answered.status is not None:
            return answered.status
        return self.body.status if self.body is not None and method in _TAKES_BODY else 200


def payload_body(event: type[BaseModel], *, filled: Iterable[str] = (),
                 optional: Iterable[str] = (),
                 extra: Mapping[str, Mapping[str, Any]] | None = None) -> Body:
    """The body of a route that publishes an event of `event` from the payload's fields,
    `namespace` and `event_id`: the payload less the `filled` fields the route takes from
    its path or key, with the `optional` ones the route fills when they are not given (an
    agent id from a key bound to an agent) not required, and `extra` fields the route reads
    itself."""
    schema = event.model_json_schema(ref_template=REFERENCE)
    definitions = dict(schema.pop("$defs", {}))
    payload_name = _referenced(schema["properties"]["payload"])
    payload = definitions.pop(payload_name)
    left_out = set(filled)
    properties = {
        **{name: schema["properties"][name] for name in CALLER_ENVELOPE_FIELDS},
        **{name: value for name, value in payload["properties"].items()
           if name not in left_out},
        **(extra or {}),
    }
    not_required = left_out | set(optional)
    required = ["namespace", *(name for name in payload.get("required", [])
                               if name not in not_required)]
    body = {"type": "object", "title": f"{event.__name__} body",
            "properties": properties, "required": required, "additionalProperties": False}
    if "description" in payload:
        body["description"] = payload["description"]
    return Body(f"{event.__name__}Body", body, definitions, status=202, publishes=True)


def event_body(name: str, events: Sequence[type[BaseModel]]) -> Body:
    """The body of a route that publishes a whole event, one of `events`: the event as a
    producer would publish it, less the producer (the key's), with its id and time filled
    when not given."""
    definitions: dict[str, Mapping[str, Any]] = {}
    for event in events:
        schema = event.model_json_schema(ref_template=REFERENCE)
        definitions.update(schema.pop("$defs", {}))
        properties = {key: value for key, value in schema["properties"].items()
                      if key != FILLED_FROM_KEY}
        schema["properties"] = properties
        schema["required"] = [key for key in schema.get("required", [])
                              if key in properties and key not in FILLED_WHEN_ABSENT]
        definitions[event.__name__] = schema
    one_of = [{"$ref": REFERENCE.format(model=event.__name__)} for event in events]
    return Body(name, {"oneOf": one_of}, definitions, status=202, publishes=True)


def openapi_document(routes: Sequence[Route], *, title: str, description: str) -> dict[str, Any]:
    """The OpenAPI 3.1 document of `routes`, each operation named by its method and path."""
    paths: dict[str, dict[str, Any]] = {}
    schemas = Components(dict(_ERROR_SCHEMAS))
    for route in routes:
        path_names = set(_PATH_NAME.findall(route.path))
        parameters = [_parameter(parameter, parameter.name in path_names)
                      for parameter in route.parameters]
        if route.body is not None:
            schemas.add_all(route.body.definitions)
            schemas.add(route.body.name, route.body.schema)
        operations = paths.setdefault(route.path, {})
        for method in route.methods:
            operations[method.lower()] = _operation(route, method, parameters,
                                                    bool(path_names),
                                                    schemas.answer(route.answers[method]))
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": title, "version": API_VERSION, "description": description},
        "paths": paths,
        "components": {
            "schemas": schemas.schemas,
            "securitySchemes": {SECURITY_SCHEME: {
                "type": "http", "scheme": "bearer", "bearerFormat": "msk_<key id>_<secret>",
                "description": "An API key (docs/access.md): it decides the namespace, the "
                               "agent and the permissions of every request."}},
            "responses": _ERROR_ANSWERS,
        },
    }


def operation_id(method: str, path: str) -> str:
    """A name unique to the method and path: `GET /v1/records/{record_id}` is
    `get_v1_records_record_id`; a path ending in a slash names its index (`/ui/`:
    `ui_index`, apart from `/ui`)."""
    name = _NOT_A_NAME.sub("_", path).strip("_")
    if not name:
        return f"{method.lower()}_root"
    return f"{method.lower()}_{name}{'_index' if path.endswith('/') else ''}"


class Components:
    """The document's schemas by name: event bodies, answers and what they reference. A name
    given twice must name the same schema: two models of one name would otherwise describe
    each other's answers."""

    def __init__(self, schemas: dict[str, Any]) -> None:
        self.schemas = schemas

    def add(self, name: str, schema: Mapping[str, Any]) -> None:
        known = self.schemas.setdefault(name, dict(schema))
        if known != schema:
            raise ValueError(f"two schemas are named {name!r}: rename one of their models")

    def add_all(self, schemas: Mapping[str, Mapping[str, Any]]) -> None:
        for name, schema in schemas.items():
            self.add(name, schema)

    def answer(self, answered: Answered) -> dict[str, Any]:
        """The content of an answer, its model's schema (and what it references) added."""
        if isinstance(answered, Raw):
            return {media_type: {"schema": {"type": "string"}}
                    for media_type in answered.media_types}
        if isinstance(answered, OneOf):
            return {"application/json": {"schema": {"oneOf": [
                self.model(model) for model in answered.models]}}}
        return {"application/json": {"schema": self.model(answered)}}

    def model(self, model: type[BaseModel]) -> dict[str, Any]:
        """A reference to the model's schema, added with what it references."""
        schema = model.model_json_schema(ref_template=REFERENCE, mode="serialization")
        self.add_all(schema.pop("$defs", {}))
        self.add(model.__name__, schema)
        return {"$ref": REFERENCE.format(model=model.__name__)}


def _operation(route: Route, method: str, parameters: list[dict[str, Any]],
               names_something: bool, content: dict[str, Any]) -> dict[str, Any]:
    body = route.body if method in _TAKES_BODY else None
    responses: dict[str, Any] = {
        str(route.success(method)): {"description": route.summary or "The answer",
                                     **({"content": content} if content else {})},
        "400": {"$ref": "#/components/responses/BadRequest"},
    }
    if route.waits(method):
        responses["200"] = {"description": "Decided within the wait asked (`wait`, or "
                                           "`Prefer: wait=N`): the write's outcome",
                            "content": content}
    operation: dict[str, Any] = {
        "operationId": operation_id(method, route.path),
        "tags": [_tag(route.path)],
        "parameters": parameters,
        "responses": responses,
    }
    if route.summary:
        operation["summary"] = route.summary
    if route.public:
        operation["security"] = []
    else:
        operation["security"] = [{SECURITY_SCHEME: []}]
        responses["401"] = {"$ref": "#/components/responses/Unauthorized"}
        responses["403"] = {"$ref": "#/components/responses/Forbidden"}
        responses["503"] = {"$ref": "#/components/responses/Unavailable"}
    if names_something or (body is not None and body.publishes):
        responses["404"] = {"$ref": "#/components/responses/NotFound"}
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": {"$ref": REFERENCE.format(model=body.name)}}}}
        if body.publishes:
            responses["503"] = {"$ref": "#/components/responses/NotPublished"}
    return operation


def _parameter(parameter: Parameter, in_path: bool) -> dict[str, Any]:
    if in_path:
        return {"name": parameter.name, "in": "path", "required": True,
                "schema": dict(parameter.schema)}
    described: dict[str, Any] = {"name": parameter.name, "in": "query", "required": False}
    if parameter.repeats:
        # Given more than once, or once as a comma-separated list: the server takes both.
        described.update(schema={"type": "array", "items": dict(parameter.schema)},
                         style="form", explode=True)
    else:
        described["schema"] = dict(parameter.schema)
    return described


def _tag(path: str) -> str:
    """The operation's group: its path's first segment after the version."""
    segments = [segment for segment in path.split("/") if segment]
    if segments and segments[0] == "v1":
        segments = segments[1:]
    return segments[0] if segments else "root"


def _referenced(schema: Mapping[str, Any]) -> str:
    return str(schema["$ref"]).rsplit("/", 1)[-1]


_ERROR_SCHEMAS: dict[str, Any] = {
    "Error": {"type": "object", "required": ["error"],
              "properties": {"error": {"type": "string"}}},
    "Rejected": {
        "type": "object", "required": ["error"],
        "properties": {"error": {"type": "string"}, "reason": {
            "type": "string",
            "description": "The reason the event's dead letter would carry "
                           "(docs/bad-input.md), when the body is the fault"}}},
    "NotPublished": {
        "type": "object", "required": ["error"],
        "properties": {"error": {"type": "string"}, "event_id": {
            "type": "string", "description": "The event id to retry with (the worker "
                                             "applies an event once); absent when the key "
                                             "could not be checked"}}},
}


def _error_answer(description: str, schema: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {
        "schema": {"$ref": REFERENCE.format(model=schema)}}}}


_ERROR_ANSWERS: dict[str, Any] = {
    "BadRequest": _error_answer(
        "A parameter or body the route refuses; not retriable as sent", "Rejected"),
    "Unauthorized": _error_answer("No key, or one that is unknown or revoked", "Error"),
    "Forbidden": _error_answer("The key may not do this in this namespace", "Error"),
    "NotFound": _error_answer(
        "No such thing, or one the key may not see (answered alike)", "Error"),
    "Unavailable": _error_answer(
        "The key cannot be checked now (Postgres away); retriable", "Error"),
    "NotPublished": _error_answer(
        "Kafka did not acknowledge the event in time; retriable with the same event_id, "
        "or the key cannot be checked now", "NotPublished"),
}
