"""The ingest app as it is wired (streams/app.py), without its stores: its aiohttp router and
the OpenAPI document of its routes, for the tests that hold the document against the routes
(tests/unit) and the real answers against the document (tests/integration)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from processors.api.openapi import openapi_document
from streams.api.openapi import DESCRIPTION, TITLE
from streams.app import create_app, wire_ingest
from streams.plumbing.config import Settings
from streams.plumbing.health import Health
from streams.plumbing.metrics import Metrics
from streams.plumbing.runtime import Runtime
from streams.wiring import Wiring
from tests.unit.store_fakes import InMemoryStores, Unused


def wired_ingest() -> tuple[Any, dict[str, Any]]:
    """The router and the document, wired on an event loop of their own in a thread of their
    own: wiring touches no store, and leaves the caller's loop alone."""
    made: list[tuple[Any, dict[str, Any]]] = []

    def wire() -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            settings = Settings.from_env({})
            app = create_app(settings, "ingest")
            metrics = Metrics()
            runtime = Runtime(stores=InMemoryStores(), embedder=None,  # type: ignore[arg-type]
                              metrics=metrics, producer=Unused("producer"),
                              announcements=Unused("announcements"), max_event_bytes=1024)
            wiring = Wiring(app, settings, runtime, Health(metrics, 60.0),
                            Unused("lag probe"), "ingest")  # type: ignore[arg-type]
            wire_ingest(wiring, runtime, Unused("index"),  # type: ignore[arg-type]
                        Unused("fallback"), settings)  # type: ignore[arg-type]
            made.append((app.web.web_app.router, openapi_document(
                wiring.pages.routes, title=TITLE, description=DESCRIPTION)))
        finally:
            loop.close()

    thread = threading.Thread(target=wire, name="wire-ingest")
    thread.start()
    thread.join()
    if not made:
        raise RuntimeError("wiring the ingest app failed (see the thread's traceback above)")
    return made[0]
