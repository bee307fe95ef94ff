"""The public answers: a worker's health, and the API's own OpenAPI document."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from memstream_client.answers.base import Answer


class Health(Answer):
    """`ok`, `degraded` (the index is down; searches answer from Postgres), `stalled` or
    `down`, with what was checked and what is wrong (crashed agents, stalled partitions)."""

    status: str
    role: str
    postgres: str
    index: str | None = None
    agents: dict[str, str] = Field(default_factory=dict)
    stalled: dict[str, str] = Field(default_factory=dict)


class ApiDocument(Answer):
    """The OpenAPI 3.1 document of the API (`GET /v1/openapi.json`): every route, its
    parameters, its body and its answers."""

    openapi: str
    info: dict[str, Any]
    paths: dict[str, Any]
    components: dict[str, Any]
