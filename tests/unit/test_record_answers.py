"""What the record views answer, as their declared models render it: a record whole, its
versions as history keeps them (the versioned fields beside the rest, or apart in a version
as of a moment), and whether it is in force."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from memstream_client.answers.base import Answer
from memstream_client.events import Provenance
from processors.memory.lifecycle import RecordVersion, version_fields
from schemas.records import Record
from stores.records import StoredRecord
from streams.api.memory.records import (
    standing_view,
    stored_record_answer,
    version_answer,
    version_then,
)

T0 = datetime(2026, 11, 21, 11, 0, 0, 123456, tzinfo=UTC)
RECORD = Record(
    record_id="mem_1", namespace="team-a", record_kind="memory", text="Deploys need the VPN.",
    title="Deploys", tags=("ops",), related_ids=("mem_0",), thread="conv-1", repo="acme/api",
    security_scope="internal", memory_type="fact", created_at=T0,
    provenance=Provenance(source_event_id="e1", source_topic="memory.events",
                          source_partition=0, source_offset=3, producer="agent-7"))


def shown(answer: Answer) -> dict[str, Any]:
    rendered: dict[str, Any] = json.loads(answer.rendered())
    return rendered


def version(number: int, fields: dict[str, Any]) -> RecordVersion:
    return RecordVersion(record_id="mem_1", version=number, text="Deploys need the VPN.",
                         body={}, fields=fields, change="created", actor="agent-7",
                         event_id=f"e{number}", changed_at=T0, changed=(), reason=None)


def test_a_record_read_by_id_shows_every_field_it_has() -> None:
    answer = shown(stored_record_answer(StoredRecord(RECORD, None, 2, None)))
    assert set(answer) == set(Record.model_fields) | {"version", "superseded_by"}
    assert (answer["thread"], answer["repo"], answer["security_scope"]) == (
        "conv-1", "acme/api", "internal")
    assert (answer["created_at"], answer["valid_until"]) == (T0.isoformat(), None)


def test_a_version_shows_its_versioned_fields_and_an_older_one_lacks_the_newer_ones() -> None:
    later = RECORD.model_copy(update={"valid_until": T0 + timedelta(days=1),
                                      "invalidated_by": "mem_2"})
    current = shown(version_answer(version(2, version_fields(later))))
    assert (current["tags"], current["invalidated_by"]) == (["ops"], "mem_2")
    # As the store keeps it, to the microsecond and the offset.
    assert current["valid_until"] == version_fields(later)["valid_until"]
    # Made before the store kept when a fact stopped holding.
    before = {name: value for name, value in version_fields(RECORD).items()
              if name not in {"valid_until", "invalidated_by"}}
    older = shown(version_answer(version(1, before)))
    assert "valid_until" not in older and "invalidated_by" not in older
    then = shown(version_then(version(1, before)))
    assert (then["record_id"], then["fields"]) == ("mem_1", before)


def test_a_record_in_force_merged_or_restated_says_so_with_what_replaced_it() -> None:
    assert shown(standing_view(RECORD, None)) == {"in_force": True, "note": None}
    assert shown(standing_view(RECORD, "mem_m")) == {
        "in_force": False, "merged_into": "mem_m", "note": "merged into mem_m"}
    restated = RECORD.model_copy(update={"valid_until": T0, "invalidated_by": "mem_2"})
    assert shown(standing_view(restated, None)) == {
        "in_force": False, "invalidated_by": "mem_2", "valid_until": T0.isoformat(),
        "note": "superseded by mem_2 on 2026-11-21"}
