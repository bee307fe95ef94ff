"""What makes an OpenAPI 3.1 document usable by a client generator, checked without one
(no OpenAPI validator is installed): every reference resolves, every operation has answers
and a unique id, every path segment is a required path parameter, every schema is a valid
JSON Schema 2020-12, and every security requirement names a scheme."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(METHOD, path, operation) of every operation of the document."""
    for path, item in document["paths"].items():
        for method in METHODS:
            if method in item:
                yield method.upper(), path, item[method]


def structural_problems(document: dict[str, Any]) -> list[str]:
    problems = []
    if not str(document.get("openapi", "")).startswith("3.1."):
        problems.append(f"openapi is {document.get('openapi')!r}, not 3.1.x")
    if not {"title", "version"} <= set(document.get("info", {})):
        problems.append("info lacks its title or version")
    problems += [f"unresolved reference {ref}" for ref in _references(document)
                 if not _resolves(document, ref)]
    schemes = set(document.get("components", {}).get("securitySchemes", {}))
    seen_ids: set[str] = set()
    for method, path, operation in operations(document):
        where = f"{method} {path}"
        if not operation.get("responses"):
            problems.append(f"{where}: no responses")
        operation_id = operation.get("operationId")
        if not operation_id or operation_id in seen_ids:
            problems.append(f"{where}: operationId {operation_id!r} missing or not unique")
        seen_ids.add(str(operation_id))
        in_path = {p["name"] for p in operation.get("parameters", []) if p["in"] == "path"
                   and p.get("required") is True}
        if in_path != set(re.findall(r"\{(\w+)\}", path)):
            problems.append(f"{where}: path parameters {sorted(in_path)} are not its segments")
        names = [(p["name"], p["in"]) for p in operation.get("parameters", [])]
        if len(names) != len(set(names)):
            problems.append(f"{where}: a parameter is listed twice")
        for requirement in operation.get("security", []):
            problems += [f"{where}: unknown security scheme {name}"
                         for name in requirement if name not in schemes]
    for name, schema in document.get("components", {}).get("schemas", {}).items():
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            problems.append(f"schema {name}: {exc.message}")
    return problems


def _references(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _references(value)
    elif isinstance(node, list):
        for item in node:
            yield from _references(item)


def _resolves(document: dict[str, Any], ref: str) -> bool:
    if not ref.startswith("#/"):
        return False
    node: Any = document
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True
