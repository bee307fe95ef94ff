"""What several unit tests share: the ingest app as it is wired (streams/app.py), without its
stores, with the OpenAPI document of its routes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from processors.api.openapi import openapi_document
from streams.api.openapi import DESCRIPTION, TITLE
from streams.app import create_app, wire_ingest
from streams.plumbing.config import Settings
from streams.plumbing.health import Health
from streams.plumbing.metrics import Metrics
from streams.plumbing.runtime import Runtime
from streams.wiring import Wiring
from tests.unit.store_fakes import InMemoryStores, Unused


@pytest.fixture(scope="session")
def wired() -> Iterator[tuple[Any, dict[str, Any]]]:
    """The ingest app's aiohttp router, and its OpenAPI document; wiring touches no store."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    settings = Settings.from_env({})
    app = create_app(settings, "ingest")
    metrics = Metrics()
    runtime = Runtime(stores=InMemoryStores(), embedder=None,  # type: ignore[arg-type]
                      metrics=metrics, producer=Unused("producer"),
                      announcements=Unused("announcements"), max_event_bytes=1024)
    wiring = Wiring(app, settings, runtime, Health(metrics, 60.0),
                    Unused("lag probe"), "ingest")  # type: ignore[arg-type]
    wire_ingest(wiring, runtime, Unused("index"), Unused("fallback"),  # type: ignore[arg-type]
                settings)
    yield (app.web.web_app.router,
           openapi_document(wiring.pages.routes, title=TITLE, description=DESCRIPTION))
    loop.close()
