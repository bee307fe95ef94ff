"""Real answers held against what the OpenAPI document declares them to be.

Each success answer is validated against its operation's declared schema, made strict: an
object that declares its fields may hold no other (the document itself leaves answers open,
so that a client generated from it keeps working when a worker adds a field; a field the
worker sends and its model does not declare is drift all the same). An answer of a status
the operation does not declare is drift too.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from tests.openapi_structure import operations

DOCUMENT = "urn:memstream:openapi"


def strict(schema: Any) -> Any:
    """The schema with every object that declares its properties closed to others."""
    if isinstance(schema, dict):
        closed = {key: strict(value) for key, value in schema.items()}
        if "properties" in closed:
            closed["additionalProperties"] = False
        return closed
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    return schema


@dataclass(frozen=True)
class Operation:
    method: str
    template: str
    pattern: re.Pattern[str]
    responses: dict[str, Any]


class DeclaredAnswers:
    """The document's operations, and what each declares it answers."""

    def __init__(self, document: dict[str, Any]) -> None:
        closed = strict(copy.deepcopy(document))
        self._registry: Registry[Any] = Registry().with_resource(
            DOCUMENT, Resource.from_contents(closed, default_specification=DRAFT202012))
        # Literal paths before templated ones: POST /v1/runs/events is not a run's id.
        self._operations = sorted(
            (Operation(method, path, re.compile(re.sub(r"\{\w+\}", "[^/]+", path) + "$"),
                       operation["responses"])
             for method, path, operation in operations(closed)),
            key=lambda operation: operation.template.count("{"))

    @property
    def operations(self) -> list[tuple[str, str]]:
        return [(operation.method, operation.template) for operation in self._operations]

    def operation_of(self, method: str, path: str) -> Operation | None:
        return next((operation for operation in self._operations
                     if operation.method == method and operation.pattern.match(path)), None)

    def problems(self, operation: Operation, status: int, body: Any) -> list[str]:
        """What is wrong with a success answer of the operation: a status it does not
        declare, or a body its schema refuses."""
        where = f"{operation.method} {operation.template} {status}"
        response = operation.responses.get(str(status))
        if response is None:
            return [f"{where}: the status is not declared"]
        schema = response.get("content", {}).get("application/json", {}).get("schema")
        if schema is None:
            return [f"{where}: answered JSON, declares none"]
        validator = Draft202012Validator(_in_document(schema), registry=self._registry)
        return [f"{where}: {'/'.join(map(str, error.absolute_path)) or 'the answer'}: "
                f"{_why(error)[:300]}" for error in validator.iter_errors(body)]


def _in_document(schema: dict[str, Any]) -> dict[str, Any]:
    """An answer's schema with its references (its model's, or each of its models') into
    the document."""
    if "$ref" in schema:
        return {"$ref": f"{DOCUMENT}{schema['$ref']}"}
    if "oneOf" in schema:
        return {"oneOf": [_in_document(one) for one in schema["oneOf"]]}
    return schema


def _why(error: ValidationError) -> str:
    """What is wrong; for an answer that is none of several models, what is wrong with it as
    each of them."""
    if not error.context:
        return error.message
    return f"{error.message}: " + "; ".join(
        f"{'/'.join(map(str, sub.absolute_path)) or 'the answer'}: {sub.message}"
        for sub in error.context)


@dataclass
class AnswerLog:
    """Every success answer a test's HTTP client received from a worker, checked."""

    declared: DeclaredAnswers
    problems: list[str] = field(default_factory=list)
    checked: dict[tuple[str, str], int] = field(default_factory=dict)

    def record(self, request: httpx.Request, response: httpx.Response) -> None:
        if not 200 <= response.status_code < 300 or \
                not response.headers.get("content-type", "").startswith("application/json"):
            return
        operation = self.declared.operation_of(request.method, request.url.path)
        if operation is None:
            return
        key = (operation.method, operation.template)
        self.checked[key] = self.checked.get(key, 0) + 1
        self.problems += self.declared.problems(operation, response.status_code,
                                                json.loads(response.content))

    @contextmanager
    def capturing(self) -> Iterator[None]:
        """Record the answers of every httpx client of this process while inside."""
        sync_send: Callable[..., httpx.Response] = httpx.Client.send
        async_send: Callable[..., Any] = httpx.AsyncClient.send

        def send(client: httpx.Client, request: httpx.Request, *args: Any,
                 **kwargs: Any) -> httpx.Response:
            response = sync_send(client, request, *args, **kwargs)
            if not kwargs.get("stream"):
                self.record(request, response)
            return response

        async def asend(client: httpx.AsyncClient, request: httpx.Request, *args: Any,
                        **kwargs: Any) -> httpx.Response:
            response: httpx.Response = await async_send(client, request, *args, **kwargs)
            if not kwargs.get("stream"):
                self.record(request, response)
            return response

        httpx.Client.send = send  # type: ignore[method-assign]
        httpx.AsyncClient.send = asend  # type: ignore[method-assign]
        try:
            yield
        finally:
            httpx.Client.send = sync_send  # type: ignore[method-assign]
            httpx.AsyncClient.send = async_send  # type: ignore[method-assign]

    def summary(self) -> str:
        never = sorted(set(self.declared.operations) - set(self.checked))
        return (f"answers held against their declared schemas: {sum(self.checked.values())} "
                f"of {len(self.checked)} operations; never answered in this run: "
                f"{len(never)}" + "".join(f"\n  {method} {path}" for method, path in never))
