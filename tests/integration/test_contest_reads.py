"""The contest a read by id finds with each record (stores/records.py), on a real Postgres: the
invalidation waiting for a reviewer, and no other diff; gone once decided, superseded, or its
correction out of force; as of a moment, the one waiting then."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from memstream_client.events import LIFECYCLE_EVENT_TYPES, Provenance
from processors.memory.lifecycle import Facts, Outcome, Protection, invalidated, outcome_of
from processors.recall.contested import Contest
from schemas.records import Record
from stores.index.protocol import SearchScope
from stores.postgres.stores import PostgresStores
from tests.integration.test_stores import fresh_dsn, migrated_dsn, pg_dsn, unit_vectors

pytestmark = pytest.mark.integration

__all__ = ["fresh_dsn", "migrated_dsn", "pg_dsn"]  # the fixtures, shared with test_stores.py
NS = "ns"
PROTECT: tuple[Protection, ...] = ("approved",)


def memory(record_id: str, text: str) -> Record:
    return Record(record_id=record_id, namespace=NS, record_kind="memory", text=text,
                  memory_type="fact", created_at=datetime.now(UTC),
                  provenance=Provenance(source_event_id=f"e-{record_id}",
                                        source_topic="memory.events", source_partition=0,
                                        source_offset=0, producer="tests"))


def lifecycle(event_type: str, event_id: str, **payload: Any) -> Any:
    return LIFECYCLE_EVENT_TYPES[event_type].model_validate({
        "event_id": event_id, "type": event_type, "namespace": NS,
        "occurred_at": datetime.now(UTC), "producer": "tests", "payload": payload})


@pytest.fixture
async def stores(migrated_dsn: str) -> AsyncIterator[PostgresStores]:
    opened = await PostgresStores.connect(migrated_dsn)
    try:
        yield opened
    finally:
        await opened.close()


class Memory:
    """A namespace of a few memories and the lifecycle events applied to them."""

    def __init__(self, stores: PostgresStores) -> None:
        self.stores = stores

    async def write(self, *records: Record) -> None:
        await self.stores.records.insert_records(
            list(zip(records, unit_vectors(len(records)), strict=True)))

    async def save(self, event_id: str, outcome: Outcome) -> None:
        current = await self.stores.versions.current(NS, outcome.record.record_id)
        assert current is not None
        await self.stores.versions.save(event_id, "tests", current.current.version, outcome,
                                        None)

    async def invalidate(self, older: str, newer: Record, event_id: str) -> None:
        current = await self.stores.versions.current(NS, older)
        assert current is not None
        await self.save(event_id, invalidated(current.current, newer, "a -> b", event_id,
                                              PROTECT))

    async def apply(self, event_id: str, event_type: str, **payload: Any) -> None:
        event = lifecycle(event_type, event_id, **payload)
        current = await self.stores.versions.current(NS, payload["record_id"])
        assert current is not None
        diff = payload.get("diff_id")
        facts = Facts(current.current, diff=None if diff is None else
                      await self.stores.versions.pending_diff(NS, diff))
        await self.save(event_id, outcome_of(event, facts, PROTECT))

    async def contests(self, *record_ids: str) -> dict[str, Contest | None]:
        found = await self.stores.records.records_by_id(NS, list(record_ids))
        return {record_id: found[record_id].contested for record_id in record_ids}

    async def contests_then(self, moment: datetime, *record_ids: str
                            ) -> dict[str, Contest | None]:
        found = await self.stores.records.records_as_of(NS, list(record_ids), moment)
        return {record_id: found[record_id].contested for record_id in record_ids}


async def instant() -> datetime:
    """A moment strictly between what was stored before and what is stored after."""
    await asyncio.sleep(0.05)
    moment = datetime.now(UTC)
    await asyncio.sleep(0.05)
    return moment


async def test_a_pending_invalidation_contests_until_a_reviewer_rejects_it(
    stores: PostgresStores,
) -> None:
    ns = Memory(stores)
    old = memory("old", "The standup is at 9:00.").model_copy(
        update={"related_ids": ("anchor",)})
    new = memory("new", "The standup is now at 10:30.")
    await ns.write(old, new)
    before = await instant()
    await ns.invalidate("old", new, "inv_1")
    waiting = await instant()
    assert await ns.contests("old", "new") == {"old": Contest("old", "new", "inv_1"),
                                               "new": None}
    # A search by related ids reads it too.
    (listed,) = await stores.records.related_records(
        SearchScope(NS, 5, 0.0, related_ids=("anchor",)))
    assert listed.record.contested == Contest("old", "new", "inv_1")
    assert await ns.contests_then(before, "old") == {"old": None}
    assert await ns.contests_then(waiting, "old") == {"old": Contest("old", "new", "inv_1")}

    await ns.apply("review-1", "memory.review", record_id="old", decision="reject",
                   reviewer="ana", diff_id="inv_1")
    assert await ns.contests("old") == {"old": None}
    assert await ns.contests_then(waiting, "old") == {"old": Contest("old", "new", "inv_1")}
    assert await ns.contests_then(await instant(), "old") == {"old": None}


async def test_a_newer_proposal_supersedes_the_contest_and_an_update_is_no_contest(
    stores: PostgresStores,
) -> None:
    ns = Memory(stores)
    old, new, newest = (memory("old", "The standup is at 9:00."),
                        memory("new", "The standup is now at 10:30."),
                        memory("newest", "The standup is now at 11:00."))
    await ns.write(old, new, newest)
    await ns.invalidate("old", new, "inv_1")
    await ns.invalidate("old", newest, "inv_2")
    assert await ns.contests("old") == {"old": Contest("old", "newest", "inv_2")}
    first = await instant()
    # An update of the record waits as a diff of its own, which supersedes the invalidation.
    await ns.apply("update-1", "memory.update", record_id="old", expected_version=1,
                   text="The standup is at 9:15.")
    assert await ns.contests("old") == {"old": None}
    assert await ns.contests_then(first, "old") == {"old": Contest("old", "newest", "inv_2")}


async def test_a_correction_out_of_force_contests_nothing(stores: PostgresStores) -> None:
    ns = Memory(stores)
    await ns.write(memory("old", "The standup is at 9:00."),
                   memory("new", "The standup is now at 10:30."))
    await ns.invalidate("old", memory("new", "The standup is now at 10:30."), "inv_1")
    await ns.apply("deprecate-1", "memory.deprecate", record_id="new", reason="wrong")
    assert await ns.contests("old") == {"old": None}


async def test_approving_takes_the_record_out_of_force_and_as_of_the_wait_it_was_contested(
    stores: PostgresStores,
) -> None:
    ns = Memory(stores)
    new = memory("new", "The standup is now at 10:30.")
    await ns.write(memory("old", "The standup is at 9:00."), new)
    await ns.invalidate("old", new, "inv_1")
    waiting = await instant()
    await ns.apply("review-1", "memory.review", record_id="old", decision="approve",
                   reviewer="ana", diff_id="inv_1")
    assert await ns.contests_then(waiting, "old") == {"old": Contest("old", "new", "inv_1")}
    after = await stores.records.records_as_of(NS, ["old"], await instant())
    assert after == {}, "invalidated: not in force"
    (found,) = (await stores.records.records_by_id(NS, ["old"])).values()
    assert (found.invalidated_by, found.contested) == ("new", None)
