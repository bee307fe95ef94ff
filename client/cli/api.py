"""The worker's HTTP API as the CLI calls it: JSON in and out, each failure turned into a
`CliError` that says what went wrong in one line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from client.cli.errors import EXIT_AUTH, EXIT_NOT_FOUND, EXIT_OTHER, EXIT_USAGE, CliError

Params = Mapping[str, str | int | float | Sequence[str] | None]
TIMEOUT_S = 30.0


class Api:
    def __init__(self, url: str, key: str | None, *, timeout_s: float = TIMEOUT_S) -> None:
        self.url = url
        self._has_key = key is not None
        self._client = httpx.Client(
            base_url=url, timeout=timeout_s,
            headers={"Authorization": f"Bearer {key}"} if key else {})

    def close(self) -> None:
        self._client.close()

    def get(self, path: str, params: Params | None = None) -> dict[str, Any]:
        return self._call("GET", path, params=params)

    def post(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._call("POST", path, json=dict(body))

    def delete(self, path: str) -> dict[str, Any]:
        return self._call("DELETE", path)

    def _call(self, method: str, path: str, *, params: Params | None = None,
              json: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            answer = self._client.request(method, path, params=_query(params or {}), json=json)
        except httpx.TimeoutException:
            raise CliError(EXIT_OTHER, f"the worker at {self.url} did not answer in time") \
                from None
        except httpx.TransportError as exc:
            raise CliError(EXIT_OTHER, f"the worker is not reachable at {self.url} "
                                       f"({type(exc).__name__}: {exc})") from None
        if answer.status_code >= 400:
            raise self._failure(answer)
        try:
            body = answer.json()
        except ValueError:
            raise CliError(EXIT_OTHER, f"{method} {path}: the answer is not JSON") from None
        if not isinstance(body, dict):
            raise CliError(EXIT_OTHER, f"{method} {path}: the answer is not a JSON object")
        return body

    def _failure(self, answer: httpx.Response) -> CliError:
        try:
            detail = str(answer.json()["error"])
        except (ValueError, KeyError, TypeError):
            detail = answer.text.strip()[:200] or answer.reason_phrase
        status = answer.status_code
        if status in (401, 403):
            hint = "" if self._has_key or status == 403 else \
                " (no key given: set MEMSTREAM_API_KEY or `key` in the config file)"
            return CliError(EXIT_AUTH, f"{'unauthorized' if status == 401 else 'forbidden'}: "
                                       f"{detail}{hint}")
        if status == 404:
            return CliError(EXIT_NOT_FOUND, f"not found: {detail}")
        if status == 400:
            return CliError(EXIT_USAGE, f"bad request: {detail}")
        return CliError(EXIT_OTHER, f"the worker answered {status}: {detail}")


def _query(params: Params) -> httpx.QueryParams:
    """Query pairs: None left out, a sequence repeated."""
    pairs: list[tuple[str, str | int | float | bool | None]] = []
    for name, value in params.items():
        if value is None:
            continue
        if isinstance(value, str | int | float):
            pairs.append((name, str(value)))
        else:
            pairs.extend((name, item) for item in value)
    return httpx.QueryParams(pairs)
