from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt

from memstream_client.events import Provenance
from processors.consolidation.plan import (
    candidate_of,
    merged_record,
    plan_consolidation,
    report_clusters,
)
from schemas.records import Record

T0 = datetime(2026, 11, 1, tzinfo=UTC)
DIM = 384


def provenance(event_id: str, topic: str = "memory.events") -> Provenance:
    return Provenance(source_event_id=event_id, source_topic=topic, source_partition=0,
                      source_offset=0, producer="tests")


def memory(record_id: str, text: str, **fields: Any) -> Record:
    values: dict[str, Any] = {
        "record_id": record_id, "namespace": "team-a", "record_kind": "memory",
        "text": text, "memory_type": "fact", "provenance": provenance(f"e-{record_id}"),
        "created_at": T0, **fields}
    return Record(**values)


def axes(count: int) -> npt.NDArray[np.float64]:
    q, _ = np.linalg.qr(np.random.default_rng(3).normal(size=(DIM, count)))
    return q.T


REQUEST = provenance("cns_1", topic="memory.consolidate")


def test_two_copies_of_a_memory_merge_and_the_unrelated_one_stays() -> None:
    records = [memory("m1", "Deploys need the VPN."), memory("m2", "Deploys need the VPN!"),
               memory("m3", "Lunch is at noon.")]
    a, b = axes(2)
    plan = plan_consolidation(records, np.array([a, a, b]))
    assert plan.memories == 3
    (merge,) = plan.merges
    assert merge.member_ids == ("m1", "m2")
    assert plan.superseded == {"m1": merge.record_id, "m2": merge.record_id}
    assert report_clusters(plan) == [{"new_id": merge.record_id, "members": ["m1", "m2"],
                                      "medoid_id": merge.medoid_id, "size": 2}]
    assert {"reduce", "hdbscan", "guard", "merge"} <= set(plan.timings)


def test_the_replacement_is_derived_lives_as_long_as_its_members_and_names_them() -> None:
    members = [
        memory("m1", "Deploys need the VPN.", tier="active", expires_at=T0 + timedelta(days=1)),
        memory("m2", "Deploys need the VPN. See [[Network]].", tier="long_term",
               expires_at=T0 + timedelta(days=9), review_state="draft"),
    ]
    a = axes(1)[0]
    (merge,) = plan_consolidation(members, np.array([a, a])).merges
    record = merged_record(merge, members, REQUEST, policy="approved")
    assert record.record_id == merge.record_id
    assert record.trust_class == "derived"
    assert record.tier == "long_term"
    assert record.expires_at == T0 + timedelta(days=9)
    assert record.review_state == "approved", "the strongest member's state, by policy"
    assert merged_record(merge, members, REQUEST).review_state == "draft", "by default"
    assert record.provenance == REQUEST
    assert record.body["merged_from"] == ["m1", "m2"]
    assert sorted(record.body["source_event_ids"]) == ["e-m1", "e-m2"]
    assert record.body["wiki_links"] == ["Network"]
    forever = merged_record(merge, [members[0], members[1].model_copy(
        update={"expires_at": None})], REQUEST)
    assert forever.expires_at is None, "a member that never expires keeps the merge"


def test_the_replacement_s_body_keeps_each_member_s_attribution() -> None:
    members = [memory("m1", "Deploys need the VPN.", source_ref="runbook#vpn",
                      agent_id="ops-bot"),
               memory("m2", "Deploys need the VPN!", source_ref="run-42", agent_id="ops-bot",
                      created_at=T0 + timedelta(hours=1))]
    a = axes(1)[0]
    (merge,) = plan_consolidation(members, np.array([a, a])).merges
    body = merged_record(merge, members, REQUEST).body
    assert body["member_source_refs"] == ["runbook#vpn", "run-42"]
    assert body["members"] == [
        {"record_id": "m1", "speaker": None, "agent_id": "ops-bot", "source_ref": "runbook#vpn",
         "occurred_at": T0.isoformat()},
        {"record_id": "m2", "speaker": None, "agent_id": "ops-bot", "source_ref": "run-42",
         "occurred_at": (T0 + timedelta(hours=1)).isoformat()}]


def test_a_merge_is_seen_with_what_it_replaced_so_an_interrupted_run_is_finished() -> None:
    members = [memory("m1", "Deploys need the VPN."), memory("m2", "Deploys need the VPN!")]
    a, b = axes(2)
    (merge,) = plan_consolidation(members, np.array([a, a])).merges
    replacement = merged_record(merge, members, REQUEST)
    candidate = candidate_of(replacement)
    assert candidate.source_event_ids[:2] == ("m1", "m2")
    assert candidate_of(members[0]).source_event_ids == ("e-m1",)

    # The run stopped after storing the replacement, before superseding the members.
    plan = plan_consolidation([*members, replacement, memory("m3", "Lunch is at noon.")],
                              np.array([a, a, a, b]))
    assert plan.interrupted == {"m1": replacement.record_id, "m2": replacement.record_id}
    assert plan.merges == [], "the replacement is not merged with the records it replaced"
    assert plan.superseded == plan.interrupted


def test_an_empty_namespace_plans_nothing() -> None:
    plan = plan_consolidation([], np.zeros((0, DIM)))
    assert plan.memories == 0 and plan.merges == [] and plan.superseded == {}


def test_a_rewritten_text_replaces_the_merge_and_the_body_keeps_the_merge() -> None:
    members = [memory("m1", "Deploys need the VPN."), memory("m2", "Deploys need the VPN!")]
    a = axes(1)[0]
    (merge,) = plan_consolidation(members, np.array([a, a])).merges
    record = merged_record(merge, members, REQUEST, rewritten="Deploys need the [[VPN]].")
    assert record.text == "Deploys need the [[VPN]]."
    assert record.body["deterministic_text"] == merge.text
    assert record.body["wiki_links"] == ["VPN"]
    assert "deterministic_text" not in merged_record(merge, members, REQUEST).body


def test_only_restatements_of_one_text_merge_approved_by_default() -> None:
    a = axes(1)[0]
    same = [memory("m1", "Deploys need the VPN."), memory("m2", "deploys  need the VPN!")]
    (merge,) = plan_consolidation(same, np.array([a, a])).merges
    assert merged_record(merge, same, REQUEST).review_state == "approved"
    reworded = [same[0], memory("m2", "Deploys need the office VPN.")]
    (merge,) = plan_consolidation(reworded, np.array([a, a])).merges
    assert merged_record(merge, reworded, REQUEST).review_state == "draft"


def test_a_draft_merge_and_its_members_wait_for_review() -> None:
    members = [memory("m1", "Deploys need the VPN."), memory("m2", "Deploys need the VPN up.")]
    a, b = axes(2)
    (merge,) = plan_consolidation(members, np.array([a, a])).merges
    draft = merged_record(merge, members, REQUEST)
    assert draft.review_state == "draft"
    other = [memory("m3", "Lunch is at noon."), memory("m4", "Lunch is at noon!")]
    plan = plan_consolidation([*members, draft, *other], np.array([a, a, a, b, b]))
    assert plan.awaiting_review == {"m1", "m2", draft.record_id}
    assert plan.interrupted == {}, "a draft's live members are not an interrupted run"
    assert [m.member_ids for m in plan.merges] == [("m3", "m4")]


def test_a_rejected_merge_is_not_proposed_again() -> None:
    members = [memory("m1", "Deploys need the VPN."), memory("m2", "Deploys need the VPN up.")]
    a = axes(1)[0]
    (merge,) = plan_consolidation(members, np.array([a, a])).merges
    assert plan_consolidation(members, np.array([a, a]), rejected={merge.record_id}).merges \
        == []
