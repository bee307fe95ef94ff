"""The retrieval log (streams/reads/retrieval_log.py) on in-memory stores: reads only queue,
the timer writes in batches, rows and gaps wait while Postgres is away, and the oldest are
dropped beyond the cap."""

from __future__ import annotations

import pytest

from streams.plumbing.metrics import Metrics
from streams.reads import retrieval_log
from streams.reads.retrieval_log import RetrievalLog, query_hash
from tests.unit.store_fakes import InMemoryGaps, InMemoryRetrievals


def surface(log: RetrievalLog, record_ids: list[str], query: str = "staging VPN") -> None:
    log.surfaced(namespace="ns", record_ids=record_ids, query=query, route="/v1/search",
                 agent_id="ann", run_id="run-1")


async def test_a_read_queues_its_records_in_rank_order_and_the_timer_writes_them() -> None:
    store = InMemoryRetrievals()
    log = RetrievalLog(store, InMemoryGaps(), Metrics())
    surface(log, ["b", "a", "c"], query="  Staging VPN ")
    assert store.logged == [], "a read does no I/O"
    assert await log.write_queued() == 3
    assert [(r.record_id, r.rank) for r in store.logged] == [("b", 1), ("a", 2), ("c", 3)]
    assert {r.query_hash for r in store.logged} == {query_hash("staging vpn")}
    assert all("VPN" not in r.query_hash for r in store.logged), "the query is not kept"
    assert await log.write_queued() == 0, "written once"


async def test_rows_wait_while_postgres_is_away_and_are_written_once_it_is_back() -> None:
    store = InMemoryRetrievals(down=True)
    log = RetrievalLog(store, InMemoryGaps(), Metrics())
    surface(log, ["a", "b"])
    assert await log.write_queued() == 0
    surface(log, ["c"])
    store.down = False
    assert await log.write_queued() == 3
    assert [r.record_id for r in store.logged] == ["a", "b", "c"]


async def test_a_long_queue_is_written_in_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retrieval_log, "ROWS_PER_WRITE", 2)
    store = InMemoryRetrievals()
    log = RetrievalLog(store, InMemoryGaps(), Metrics())
    surface(log, ["a", "b", "c", "d", "e"])
    assert await log.write_queued() == 5
    assert store.writes == 3


async def test_beyond_the_cap_the_oldest_rows_are_dropped_and_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(retrieval_log, "MAX_QUEUED", 3)
    store, metrics = InMemoryRetrievals(down=True), Metrics()
    log = RetrievalLog(store, InMemoryGaps(), metrics)
    surface(log, ["a", "b", "c", "d", "e"])
    store.down = False
    assert await log.write_queued() == 3
    assert [r.record_id for r in store.logged] == ["c", "d", "e"]
    assert metrics.registry.get_sample_value("memstream_retrieval_log_dropped_total") == 2


async def test_a_recall_that_showed_nothing_is_queued_as_a_gap_and_written_by_the_timer(
) -> None:
    gaps = InMemoryGaps()
    log = RetrievalLog(InMemoryRetrievals(), gaps, Metrics())
    log.missed(namespace="ns", query="how do I rotate the signing keys", agent_id="ann")
    log.missed(namespace="ns", query="what is the VPN's address", agent_id=None)
    assert gaps.sightings == [], "a read does no I/O"
    assert await log.write_queued() == 2
    assert [(s.namespace, s.agent_id, s.source, s.text, s.query) for s in gaps.sightings] == [
        ("ns", "ann", "implicit", "how do I rotate the signing keys",
         "how do I rotate the signing keys"),
        ("ns", None, "implicit", "what is the VPN's address", "what is the VPN's address")]
    assert await log.write_queued() == 0, "written once"


async def test_gaps_wait_while_postgres_is_away_beside_the_rows_and_beyond_the_cap_are_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(retrieval_log, "MAX_QUEUED", 2)
    gaps, metrics = InMemoryGaps(down=True), Metrics()
    log = RetrievalLog(InMemoryRetrievals(), gaps, metrics)
    surface(log, ["a"])
    for query in ("first", "second", "third"):
        log.missed(namespace="ns", query=query, agent_id="ann")
    assert await log.write_queued() == 1, "the log is written while the gaps wait"
    gaps.down = False
    assert await log.write_queued() == 2
    assert [s.text for s in gaps.sightings] == ["second", "third"]
    assert metrics.registry.get_sample_value("memstream_retrieval_log_dropped_total") == 1
