from datetime import UTC, datetime

import pytest

from memstream_client.events import MemoryWrite, Provenance
from memstream_client.ids import change_event_id, digest_record_id, memory_record_id
from memstream_client.links import linked_text, wiki_links
from processors.events.intake import Rejected
from processors.memory.writes import check_references, memory_record

PROVENANCE = Provenance(source_event_id="e1", source_topic="memory.events",
                        source_partition=0, source_offset=1, producer="tests")


def write(**payload: object) -> MemoryWrite:
    return MemoryWrite.model_validate({
        "event_id": "e1", "type": "memory.write", "namespace": "team-a",
        "occurred_at": datetime(2026, 11, 1, tzinfo=UTC), "producer": "tests",
        "payload": {"text": "x", **payload},
    })


def test_the_record_is_redacted_before_anything_else() -> None:
    record = memory_record(
        write(text="Use DB_PASSWORD=hunter2xyz for staging",
              title="token sk-abcdefghijklmnopqrstuv"),
        PROVENANCE,
    )
    assert "hunter2xyz" not in record.text
    assert record.title is not None and "sk-abc" not in record.title
    assert record.body["redactions"] == {"assigned_secret": 1, "openai_key": 1}


def test_the_record_keeps_the_writers_fields() -> None:
    record = memory_record(
        write(text="See [[Deploys]] and [[VPN|the vpn]].", tags=["ops", "ops", "vpn"],
              memory_type="lesson", source_ref="https://wiki/x"),
        PROVENANCE,
    )
    assert record.record_id == memory_record_id("team-a", "e1")
    assert record.tags == ("ops", "vpn")
    assert record.memory_type == "lesson"
    assert record.source_ref == "https://wiki/x"
    assert record.body["wiki_links"] == ["Deploys", "VPN"]


def test_wiki_links_in_order_once() -> None:
    assert wiki_links("[[A]] then [[B#s]] then [[A]] and [[ C ]]") == ["A", "B", "C"]


def test_related_ids_must_exist_in_the_namespace() -> None:
    record = memory_record(write(related_ids=["mem_known", "mem_missing"]), PROVENANCE)
    check_references(memory_record(write(related_ids=["mem_known"]), PROVENANCE), {"mem_known"})
    with pytest.raises(Rejected) as caught:
        check_references(record, {"mem_known"})
    assert caught.value.rejection.reason == "broken_reference"
    assert "mem_missing" in caught.value.rejection.detail


def test_ids_are_deterministic_and_distinct() -> None:
    assert memory_record_id("a", "e") == memory_record_id("a", "e")
    assert memory_record_id("a", "e") != memory_record_id("b", "e")
    assert memory_record_id("a|b", "c") != memory_record_id("a", "b|c")
    assert digest_record_id("a", "r").startswith("dig_")
    assert change_event_id("r", 1, "created") != change_event_id("r", 2, "created")


def test_links_close_the_text_once_each() -> None:
    text = "Deploys need the [[VPN]] up."
    linked = linked_text(text, ["VPN", "Project: Billing", " mem_42 ", "Project: Billing"])
    assert linked == "Deploys need the [[VPN]] up.\n\nLinks: [[Project: Billing]] [[mem_42]]"
    assert wiki_links(linked) == ["VPN", "Project: Billing", "mem_42"]
    assert linked_text(text, ["VPN"]) == text and linked_text(text, []) == text


@pytest.mark.parametrize("target", ["", "   ", "a]]b", "x|y", "sec#tion", "x" * 201])
def test_a_link_that_cannot_be_written_is_refused(target: str) -> None:
    with pytest.raises(ValueError, match="not a link target"):
        linked_text("text", [target])
