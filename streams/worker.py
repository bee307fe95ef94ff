"""The worker's entry point: create topics, migrate, open the stores and the model, run.

`python -m streams.worker` (what the Procfile runs). Configuration: see streams/config.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from datetime import timedelta
from typing import Any

import faust
from prometheus_client import disable_created_metrics

from embedder.model import Embedder
from processors.consolidation_trigger import TriggerRules
from stores.migrate import apply_migrations
from stores.repository import Repository
from stores.vector_index import open_index
from streams.app import FaustProducer, create_app, faust_dir, wire
from streams.config import Settings
from streams.consumer_lag import ConsumerLagProbe
from streams.llm_hook import ChatEndpoint
from streams.metrics import Metrics
from streams.runtime import Runtime
from streams.topics import ensure_topics, load_topic_specs

log = logging.getLogger("memstream.worker")


async def open_runtime(settings: Settings, producer: FaustProducer) -> Runtime:
    rules = TriggerRules(settings.consolidate_min_new, settings.consolidate_once_per_day,
                         timedelta(seconds=settings.count_window_s),
                         timedelta(seconds=settings.count_keep_s))
    created = await ensure_topics(settings.kafka_bootstrap, load_topic_specs())
    if created:
        log.info("created topics: %s", ", ".join(created))
    applied = await apply_migrations(settings.pg_dsn)
    if applied:
        log.info("applied migrations: %s", ", ".join(applied))
    index = open_index(settings.index_url)
    await index.ensure_collection()
    embedder = await asyncio.to_thread(
        Embedder.load, settings.model_dir, threads=settings.embed_threads
    )
    return Runtime(
        repository=await Repository.connect(settings.pg_dsn, count_window=rules.window,
                                            keep_windows_for=rules.keep_windows_for),
        index=index,
        embedder=embedder,
        metrics=Metrics(),
        producer=producer,
        max_event_bytes=settings.max_event_bytes,
        fix_window=timedelta(hours=settings.fix_window_h),
        llm=ChatEndpoint(settings.llm_url, settings.llm_model, settings.llm_api_key,
                         settings.llm_timeout_s) if settings.llm_url else None,
        trigger_rules=rules,
    )


def main() -> None:
    # prometheus_client exports a `_created` series beside every counter and histogram, a
    # third of all series; nothing reads them.
    disable_created_metrics()  # type: ignore[no-untyped-call]  # unannotated upstream
    settings = Settings.from_env()
    faust_dir(settings).mkdir(parents=True, exist_ok=True)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    app = create_app(settings)
    runtime = loop.run_until_complete(open_runtime(settings, FaustProducer(app)))
    lag_probe = ConsumerLagProbe(settings.kafka_bootstrap, settings.app_id, runtime.metrics)
    wire(app, settings, runtime, lag_probe)
    runtime.metrics.up.set(1)

    async def close_stores() -> None:
        await lag_probe.close()
        await runtime.index.close()
        await runtime.repository.close()
        if runtime.llm is not None:
            await runtime.llm.close()

    @app.on_before_shutdown.connect
    def on_shutdown(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> Awaitable[None]:
        return close_stores()

    faust.Worker(app, loop=loop, loglevel="info").execute_from_commandline()


if __name__ == "__main__":
    main()
