"""The worker's entry point: create topics, migrate, open the stores and the model, run.

    python -m streams.worker                       # role ingest (what the Procfile's worker runs)
    python -m streams.worker --role consolidator   # the consolidator (the Procfile's consolidator)
    python -m streams.worker --dev-key             # make run: an operator key on the first start

Once it serves, the ingest worker says where, and with `--dev-key` it makes an operator key if
there is no key at all and prints it in a frame: the last lines of `make run`'s first start.
Its own logs are INFO; Faust's, mode's and aiokafka's only from WARNING, so that a clean start
and a clean stop say only what a person needs.

Configuration: see streams/plumbing/config.py. The ingest role owns the index; the
consolidator needs Postgres and the model only, so that it can run beside any index, the
embedded one included.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import shutil
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import faust
import uvloop
from prometheus_client import disable_created_metrics

from embedder.model import Embedder
from embedder.models import SIMILARITY_MODEL, model_dir
from processors.api.access import PERMISSIONS
from processors.consolidation.trigger import TriggerRules
from processors.events.errors import ModelMismatch
from processors.runs.learnings import LearningThresholds
from stores.api_keys import ApiKeys, KeyGrant, MadeKey
from stores.beads_repo import BeadsRepos
from stores.index.factory import open_index
from stores.index.postgres_search import RecordsSearch
from stores.index.protocol import VectorIndex
from stores.postgres.migrate import apply_migrations
from stores.postgres.stores import PostgresStores
from streams.app import create_app, faust_dir, group_id, wire_consolidator, wire_ingest
from streams.plumbing.config import SettingError, Settings
from streams.plumbing.consumer_lag import ConsumerLagProbe
from streams.plumbing.failures import RetryPolicy
from streams.plumbing.health import Health
from streams.plumbing.llm_hook import ChatEndpoint
from streams.plumbing.metrics import Metrics
from streams.plumbing.producer import KafkaProducer
from streams.plumbing.runtime import Runtime
from streams.plumbing.topics import ensure_topics, load_topic_specs, wait_for_group_coordinator
from streams.stages.announcements import KafkaAnnouncementLog
from streams.wiring import Role, Wiring

log = logging.getLogger("memstream.worker")

DEV_KEY_LABEL = "development key (make run)"
# The libraries under the app log their every step at INFO.
QUIET_LOGGERS = ("faust", "mode", "aiokafka", "kafka")
FRAME = "─" * 72


async def open_runtime(settings: Settings, role: Role, producer: KafkaProducer,
                       embed_threads: int) -> Runtime:
    rules = TriggerRules(settings.consolidate_min_new, settings.consolidate_once_per_day,
                         timedelta(seconds=settings.count_window_s),
                         timedelta(seconds=settings.count_keep_s))
    created = await ensure_topics(settings.kafka_bootstrap, load_topic_specs(),
                                  settings.kafka_security)
    if created:
        log.info("created topics: %s", ", ".join(created))
    await wait_for_group_coordinator(settings.kafka_bootstrap, group_id(settings.app_id, role),
                                     settings.kafka_security)
    applied = await apply_migrations(settings.pg_dsn)
    if applied:
        log.info("applied migrations: %s", ", ".join(applied))
    stores = await PostgresStores.connect(settings.pg_dsn, rules)
    # Before anything is embedded: a store of another model's vectors refuses this worker.
    await stores.embedding_model.claim(settings.model.name)
    embedder = await asyncio.to_thread(Embedder.load, settings.model_dir, threads=embed_threads)
    judge = embedder if settings.model.name == SIMILARITY_MODEL else await asyncio.to_thread(
        Embedder.load, model_dir(SIMILARITY_MODEL), threads=embed_threads)
    await producer.start()
    return Runtime(
        stores=stores,
        embedder=embedder,
        metrics=Metrics(),
        producer=producer,
        announcements=KafkaAnnouncementLog(settings.kafka_bootstrap, settings.kafka_security),
        max_event_bytes=settings.max_event_bytes,
        fix_window=timedelta(hours=settings.fix_window_h),
        learnings=LearningThresholds(settings.lesson_min_fixes, settings.pattern_min_runs),
        llm=ChatEndpoint(settings.llm_url, settings.llm_model, settings.llm_api_key,
                         settings.llm_timeout_s) if settings.llm_url else None,
        trigger_rules=rules,
        retry_policy=RetryPolicy(unexpected_attempts=settings.unexpected_attempts),
        derived_review=settings.derived_review,
        planning=BeadsRepos(settings.planning_repos, bd=shutil.which("bd"))
        if settings.memory.planning else None,
        confidence_thresholds=settings.confidence_thresholds,
        judge=judge,
    )


async def open_index_of(settings: Settings) -> VectorIndex:
    index = open_index(settings.index_url, pg_dsn=settings.pg_dsn)
    await index.ensure_collection()
    return index


async def make_development_key(keys: ApiKeys, *, auth: bool) -> MadeKey | None:
    """An operator key (every namespace, every permission), made only while no key exists at
    all and keys are checked: the key of `make run`'s first start."""
    if not auth or await keys.any_key():
        return None
    return await keys.make_key(KeyGrant(None, frozenset(PERMISSIONS), None, DEV_KEY_LABEL))


def ready_banner(settings: Settings, made: MadeKey | None) -> str:
    """What the ingest worker prints once it serves: where, and the development key if one was
    just made. Only the rules of the frame reach the right margin, so that it stays whole in a
    terminal narrower than honcho's prefix and the token."""
    url = f"http://{settings.web_host}:{settings.web_port}"
    lines = [FRAME, f" memstream is up: the API at {url}, the browser at {url}/ui/"]
    if not settings.auth:
        lines += [" MEMSTREAM_AUTH=off: every request may do everything, without a key."]
    elif made is not None:
        lines += [" The development key (every namespace, every permission), shown this once:",
                  "", f"   export MEMSTREAM_API_KEY={made.token}", "",
                  " Another operator key: .venv/bin/python -m streams.commands.keys create \\",
                  "     --all-namespaces --perm admin --label ops        (docs/access.md)"]
    else:
        lines += [" Requests want a key: the development key was printed on the first start;",
                  " docs/access.md says how to make another."]
    return "\n".join([*lines, FRAME])


class AnnouncingWorker(faust.Worker):
    """A Faust worker that runs `on_ready` once its app consumes and serves."""

    def __init__(self, app: faust.App, on_ready: Callable[[], Awaitable[None]],
                 **options: Any) -> None:
        super().__init__(app, **options)
        self._on_ready = on_ready

    async def on_startup_finished(self) -> None:
        await super().on_startup_finished()
        await self._on_ready()


def lower_priority(increment: int) -> None:
    """Make this process yield the CPU to the others by `increment` nice levels.

    With autogroups (Linux's default for desktops and most VMs), CPU time is shared between
    sessions first and niceness counts only inside one; a process started in a session of
    its own, as honcho and the test harness start each one, would compete with the writer as
    an equal whatever its nice value. Such a process, the leader of its session, also lowers
    its session's autogroup."""
    niceness = os.nice(increment)
    autogroup = Path("/proc/self/autogroup")
    if os.getsid(0) == os.getpid() and autogroup.exists():
        try:
            autogroup.write_text(f"{niceness}\n")
        except OSError as exc:
            log.warning("could not lower the autogroup's priority: %s", exc)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m streams.worker", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--role", choices=["ingest", "consolidator"], default="ingest")
    parser.add_argument("--dev-key", action="store_true",
                        help="make an operator key if there is no key at all, and print it")
    args = parser.parse_args(argv)
    role: Role = args.role
    # prometheus_client exports a `_created` series beside every counter and histogram, a
    # third of all series; nothing reads them.
    disable_created_metrics()  # type: ignore[no-untyped-call]  # unannotated upstream
    try:
        settings = Settings.from_env()
    except SettingError as exc:
        # A setting it does not take stops the worker at once, named: not a traceback, and
        # not a typo taken for "on".
        raise SystemExit(f"memstream: {exc}") from None
    if role == "consolidator":
        # HDBSCAN takes a core for seconds; on a machine shared with the writes, they come
        # first (the write->searchable latency), the consolidation a little later.
        lower_priority(settings.consolidator_nice)
    faust_dir(settings, role).mkdir(parents=True, exist_ok=True)
    # uvloop: on the stock loop, the loop's own work (its iterations, sockets, callbacks)
    # was a third of the loop thread's profile samples during packs; the same packs on
    # uvloop measured 49 ms p95 against 56 (docs/performance.md).
    loop = uvloop.new_event_loop()
    asyncio.set_event_loop(loop)
    app = create_app(settings, role)
    producer = KafkaProducer(settings.kafka_bootstrap, security=settings.kafka_security,
                             client_id=group_id(settings.app_id, role))
    # The consolidator embeds only merged texts, on one core: the other serves the writes.
    embed_threads = settings.embed_threads if role == "ingest" else 1
    try:
        runtime = loop.run_until_complete(open_runtime(settings, role, producer,
                                                       embed_threads))
    except ModelMismatch as exc:
        raise SystemExit(f"memstream: {exc}") from None
    lag_probe = ConsumerLagProbe(settings.kafka_bootstrap, group_id(settings.app_id, role),
                                 runtime.metrics, settings.kafka_security)
    health = Health(runtime.metrics, settings.stall_after_s)
    wiring = Wiring(app, settings, runtime, health, lag_probe, role)
    # Read and written by the ingest role only: the index and its fallback over Postgres.
    searches: list[VectorIndex | RecordsSearch] = []
    if role == "ingest":
        index = loop.run_until_complete(open_index_of(settings))
        fallback = loop.run_until_complete(RecordsSearch.connect(settings.pg_dsn))
        searches += [index, fallback]
        wire_ingest(wiring, runtime, index, fallback, settings)
    else:
        wire_consolidator(wiring, runtime)
    runtime.metrics.up.set(1)

    async def close_stores() -> None:
        await lag_probe.close()
        for opened in searches:
            await opened.close()
        await producer.stop()
        await runtime.stores.close()
        if runtime.llm is not None:
            await runtime.llm.close()

    @app.on_before_shutdown.connect
    def on_shutdown(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> Awaitable[None]:
        return close_stores()

    async def say_ready() -> None:
        # What startup built (the model, the app, the stores' pools) lives as long as the
        # process: frozen, the collector no longer walks it on every full collection. At 100k
        # memories, with packs read back to back, a full collection held the event loop
        # 145-190 ms every 15-20 s; frozen, 2-3 ms.
        gc.freeze()
        if role != "ingest":
            return
        made = await make_development_key(runtime.stores.keys, auth=settings.auth) \
            if args.dev_key else None
        print(ready_banner(settings, made), flush=True)

    quiet = {"merge": True, "loggers": {name: {"level": "WARNING"} for name in QUIET_LOGGERS}}
    # Without redirect_stdouts the banner is printed, not logged as a warning.
    AnnouncingWorker(app, say_ready, loop=loop, loglevel="info", logging_config=quiet,
                     redirect_stdouts=False).execute_from_commandline()


if __name__ == "__main__":
    main()
