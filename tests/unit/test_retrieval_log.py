"""The retrieval log (streams/api/retrieval_log.py) on an in-memory store: reads only queue,
the timer writes in batches, rows wait while Postgres is away, and the oldest are dropped
beyond the cap."""

from __future__ import annotations

import pytest

from streams.api import retrieval_log
from streams.api.retrieval_log import RetrievalLog, query_hash
from streams.plumbing.metrics import Metrics
from tests.unit.store_fakes import InMemoryRetrievals


def surface(log: RetrievalLog, record_ids: list[str], query: str = "staging VPN") -> None:
    log.surfaced(namespace="ns", record_ids=record_ids, query=query, route="/v1/search",
                 agent_id="ann", run_id="run-1")


async def test_a_read_queues_its_records_in_rank_order_and_the_timer_writes_them() -> None:
    store = InMemoryRetrievals()
    log = RetrievalLog(store, Metrics())
    surface(log, ["b", "a", "c"], query="  Staging VPN ")
    assert store.logged == [], "a read does no I/O"
    assert await log.write_queued() == 3
    assert [(r.record_id, r.rank) for r in store.logged] == [("b", 1), ("a", 2), ("c", 3)]
    assert {r.query_hash for r in store.logged} == {query_hash("staging vpn")}
    assert all("VPN" not in r.query_hash for r in store.logged), "the query is not kept"
    assert await log.write_queued() == 0, "written once"


async def test_rows_wait_while_postgres_is_away_and_are_written_once_it_is_back() -> None:
    store = InMemoryRetrievals(down=True)
    log = RetrievalLog(store, Metrics())
    surface(log, ["a", "b"])
    assert await log.write_queued() == 0
    surface(log, ["c"])
    store.down = False
    assert await log.write_queued() == 3
    assert [r.record_id for r in store.logged] == ["a", "b", "c"]


async def test_a_long_queue_is_written_in_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retrieval_log, "ROWS_PER_WRITE", 2)
    store = InMemoryRetrievals()
    log = RetrievalLog(store, Metrics())
    surface(log, ["a", "b", "c", "d", "e"])
    assert await log.write_queued() == 5
    assert store.writes == 3


async def test_beyond_the_cap_the_oldest_rows_are_dropped_and_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(retrieval_log, "MAX_QUEUED", 3)
    store, metrics = InMemoryRetrievals(down=True), Metrics()
    log = RetrievalLog(store, metrics)
    surface(log, ["a", "b", "c", "d", "e"])
    store.down = False
    assert await log.write_queued() == 3
    assert [r.record_id for r in store.logged] == ["c", "d", "e"]
    assert metrics.registry.get_sample_value("memstream_retrieval_log_dropped_total") == 2
