"""The entity index catches up with the records off the write path: in batches, each due
record once per version, until none is due."""

from __future__ import annotations

from datetime import UTC, datetime

from memstream_client.events import Provenance
from schemas.records import Record
from streams.plumbing.metrics import Metrics
from streams.plumbing.runtime import Runtime
from streams.stages.knowledge.entity_index import BATCH, BATCHES_PER_TICK, EntityIndexer
from tests.unit.store_fakes import InMemoryEntities, InMemoryStores


def memory(n: int, text: str) -> Record:
    return Record(record_id=f"mem_{n:04d}", namespace="team-a", record_kind="memory", text=text,
                  provenance=Provenance(source_event_id=f"e{n}", source_topic="memory.events",
                                        source_partition=0, source_offset=n, producer="tests"),
                  created_at=datetime(2026, 11, 1, tzinfo=UTC))


def indexer(entities: InMemoryEntities) -> EntityIndexer:
    return EntityIndexer(Runtime(stores=InMemoryStores(entities=entities),
                                 embedder=None,  # type: ignore[arg-type]
                                 metrics=Metrics(), producer=None,  # type: ignore[arg-type]
                                 announcements=None,  # type: ignore[arg-type]
                                 max_event_bytes=1024))


async def test_due_records_are_read_in_batches_until_none_is_due() -> None:
    entities = InMemoryEntities()
    due = 2 * BATCH * BATCHES_PER_TICK + 50
    entities.records = {f"mem_{n:04d}": (memory(n, "The billing service calls Ledger."), 1)
                        for n in range(due)}
    ticks = [await indexer(entities).catch_up() for _ in range(4)]
    # A tick reads at most its batches; then the next, until none is due.
    assert ticks == [BATCH * BATCHES_PER_TICK, BATCH * BATCHES_PER_TICK, 50, 0]
    read = entities.indexed["mem_0007"]
    assert (read.version, [m.key for m in read.mentions]) == (1, ["billing service", "ledger"])
    assert [(r.source, r.relation, r.target) for r in read.relations] == [
        ("billing service", "calls", "ledger")]


async def test_a_new_version_is_read_again_and_a_tick_is_bounded() -> None:
    entities = InMemoryEntities()
    entities.records = {f"mem_{n:04d}": (memory(n, "Ann owns the Atlas project."), 1)
                        for n in range(BATCH * BATCHES_PER_TICK + 1)}
    assert await indexer(entities).catch_up() == BATCH * BATCHES_PER_TICK
    assert await indexer(entities).catch_up() == 1
    entities.records["mem_0003"] = (
        memory(3, "Ownership of the Atlas project moved to Bea Novak."), 2)
    assert await indexer(entities).catch_up() == 1
    assert entities.indexed["mem_0003"].version == 2
    assert "bea novak" in {m.key for m in entities.indexed["mem_0003"].mentions}
