"""What every answer of the HTTP API is: a frozen model, declared once in this package, that
the worker renders (streams/api/), the SDK reads (memstream_client/sdk/) and the OpenAPI document
describes (each model's JSON Schema as serialized, processors/api/openapi.py).

An answer keeps what the worker sent: a field a client's models do not name yet is kept and
readable as an attribute (`extra="allow"`), and `raw` is the JSON object as received, so an
answer of a newer worker still parses. Values of a closed set (kinds, review states,
statuses) are plain strings for the same reason: a worker that learns a new one breaks no
client. A field with a default may be absent from an answer (the worker renders the fields
it sets); one without is always there.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    ModelWrapValidatorHandler,
    PlainSerializer,
    PrivateAttr,
    WithJsonSchema,
    model_validator,
)


class Answer(BaseModel):
    """An answer of the API, or a part of one."""

    model_config = ConfigDict(extra="allow", frozen=True)
    _raw: dict[str, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_raw(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        parsed = handler(data)
        if isinstance(data, dict):
            parsed._raw = data
        return parsed

    @property
    def raw(self) -> dict[str, Any]:
        """The JSON object as the worker sent it."""
        return self._raw

    def rendered(self) -> bytes:
        """The answer as the worker sends it: the fields it was given, by their JSON names."""
        return self.model_dump_json(by_alias=True, exclude_unset=True).encode()


def _written(moment: datetime) -> str:
    return moment.isoformat()


# A moment as the API writes it: ISO 8601 with its offset, as Python writes it
# (2026-11-28T10:55:34.123456+00:00).
Instant = Annotated[datetime, PlainSerializer(_written, return_type=str, when_used="json"),
                    WithJsonSchema({"type": "string", "format": "date-time"},
                                   mode="serialization")]
