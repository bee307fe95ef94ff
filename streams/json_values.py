"""Rows and reports as JSON values: the web layer's encoder and `json.dumps` know no
datetimes."""

from __future__ import annotations

from datetime import date
from typing import Any


def jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    if isinstance(value, date):
        return value.isoformat()
    return value
