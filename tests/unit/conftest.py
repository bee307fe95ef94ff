"""What several unit tests share: the ingest app as it is wired, with its OpenAPI document."""

from __future__ import annotations

from typing import Any

import pytest

from tests.wired_app import wired_ingest


@pytest.fixture(scope="session")
def wired() -> tuple[Any, dict[str, Any]]:
    """The ingest app's aiohttp router, and its OpenAPI document; wiring touches no store."""
    return wired_ingest()
