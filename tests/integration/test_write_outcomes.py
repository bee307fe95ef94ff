"""What became of a write, on the real stack with the worker's defaults (write-time twins on):
each outcome is answered as it happened, by the write route that waits for it and by
`GET /v1/writes/{event_id}`, over HTTP and through the SDK; never an id that does not exist.

A plain write is stored; a restatement of a live memory is `restated`, naming the memory that
holds it; a write not worth keeping is `refused` with the rule's reason; an update of an
approved (protected) memory is `proposed` as a pending diff; a write that names a record the
namespace lacks is `dead_lettered` with the reason; a write nobody sent is `pending`. Whose
record it is decides who may read its outcome, as for the record itself."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from harness.stack import Stack, Worker
from memstream_client.sdk import AsyncMemoryClient

pytestmark = pytest.mark.integration

WAIT_S = 20.0
VPN = "Deploys to staging need the office VPN."
VPN_AGAIN = "Deploys to staging need the office VPN every time."


@pytest.fixture(scope="module")
def outcome_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with Stack(tmp_path_factory.mktemp("outcomes")) as running:
        yield running


@pytest.fixture(scope="module")
def default_worker(outcome_stack: Stack) -> Iterator[Worker]:
    """A worker of the default settings: twins on, the review policy protecting approved
    records, low-value writes refused."""
    running = outcome_stack.worker(MEMSTREAM_SESSION_TIMEOUT_S="6")
    running.start()
    yield running
    running.stop()


@pytest.fixture
async def operator(default_worker: Worker) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=default_worker.base_url,
                                 headers=default_worker.headers, timeout=40) as http:
        yield http


async def write(http: httpx.AsyncClient, body: dict[str, Any], route: str = "/v1/memories",
                wait_s: float = WAIT_S, status: int = 200) -> dict[str, Any]:
    answer = await http.post(route, json=body, params={"wait": wait_s})
    assert answer.status_code == status, answer.text
    found: dict[str, Any] = answer.json()
    return found


async def test_each_write_answers_what_became_of_it(operator: httpx.AsyncClient) -> None:
    namespace = f"ns-{uuid.uuid4().hex[:10]}"
    stored = await write(operator, {"namespace": namespace, "text": VPN, "tags": ["ops"]})
    assert (stored["outcome"], stored["version"]) == ("stored", 1)
    record_id = stored["record_id"]

    # Said again in other words: held by the memory it restates, a version of it.
    restated = await write(operator, {"namespace": namespace, "text": VPN_AGAIN})
    assert (restated["outcome"], restated["record_id"], restated["version"]) == (
        "restated", record_id, 2)
    assert (await operator.get(f"/v1/records/{restated['record_id']}",
                               params={"namespace": namespace})).status_code == 200

    refused = await write(operator, {"namespace": namespace, "text": "Thanks!"})
    assert (refused["outcome"], refused["reason"], refused.get("record_id")) == (
        "refused", "filler", None)

    # Approved, so protected: an update waits for review as a pending diff.
    proposed = await write(operator, {"namespace": namespace, "expected_version": 2,
                                      "text": "Deploys to staging go through the bastion."},
                           route=f"/v1/memories/{record_id}/update")
    assert (proposed["outcome"], proposed["record_id"], proposed["diff_id"]) == (
        "proposed", record_id, proposed["event_id"])

    # A related id the namespace lacks: only the worker can tell, and dead-letters it.
    dead = await write(operator, {"namespace": namespace, "text": "Rotate the signing keys.",
                                  "related_ids": ["mem_nowhere"]})
    assert (dead["outcome"], dead["reason"], dead.get("record_id")) == (
        "dead_lettered", "broken_reference", None)
    assert "mem_nowhere" in dead["detail"]

    # Each outcome reads the same by its event id, later.
    for answer in (stored, restated, refused, proposed, dead):
        again = (await operator.get(answer["outcome_url"])).json()
        assert {key: again.get(key) for key in ("outcome", "record_id", "version", "reason")} \
            == {key: answer.get(key) for key in ("outcome", "record_id", "version", "reason")}

    nobody = (await operator.get(f"/v1/writes/{uuid.uuid4().hex}",
                                 params={"namespace": namespace})).json()
    assert (nobody["outcome"], nobody.get("decided_at")) == ("pending", None)


async def test_a_write_not_waited_for_is_pending_and_says_where_to_read_it(
    operator: httpx.AsyncClient,
) -> None:
    namespace = f"ns-{uuid.uuid4().hex[:10]}"
    accepted = await operator.post("/v1/memories", json={"namespace": namespace, "text": VPN})
    assert accepted.status_code == 202, accepted.text
    pending = accepted.json()
    assert (pending["outcome"], pending.get("record_id")) == ("pending", None)
    assert accepted.headers["Location"] == pending["outcome_url"]
    # The link names the namespace; how long to wait is the reader's.
    decided = await operator.get(f"{pending['outcome_url']}&wait={WAIT_S}")
    assert decided.json()["outcome"] == "stored"
    # RFC 7240's preference asks the same as the parameter.
    preferred = await operator.post("/v1/memories", json={"namespace": namespace,
                                                          "text": "Thanks!"},
                                    headers={"Prefer": f"wait={int(WAIT_S)}"})
    assert (preferred.status_code, preferred.json()["outcome"]) == (200, "refused")


async def test_the_sdk_answers_each_outcome_and_reads_it_by_event_id(
    default_worker: Worker,
) -> None:
    namespace = f"ns-{uuid.uuid4().hex[:10]}"
    async with AsyncMemoryClient(default_worker.base_url, key=default_worker.api_key,
                                 namespace=namespace, env={}) as memory:
        stored = await memory.write_memory(VPN)
        assert (stored.outcome, stored.decided) == ("stored", True)
        restated = await memory.write_memory(VPN_AGAIN)
        assert (restated.outcome, restated.record_id) == ("restated", stored.record_id)
        refused = await memory.write_memory("lol")
        assert (refused.outcome, refused.record_id, refused.reason) == (
            "refused", None, "filler")
        at_once = await memory.write_memory("The bastion host rejects other traffic.",
                                            wait_s=0)
        assert (at_once.outcome, at_once.record_id) == ("pending", None)
        later = await memory.write_outcome(at_once.event_id, wait_s=WAIT_S)
        assert later.outcome == "stored" and later.record_id is not None


async def test_whose_record_it_is_decides_who_reads_what_became_of_the_write(
    outcome_stack: Stack, default_worker: Worker,
) -> None:
    namespace = f"ns-{uuid.uuid4().hex[:10]}"
    ann = outcome_stack.make_key("--namespace", namespace, "--perm", "read,write",
                                 "--agent", "ann")
    bob = outcome_stack.make_key("--namespace", namespace, "--perm", "read,write",
                                 "--agent", "bob")
    async with AsyncMemoryClient(default_worker.base_url, key=ann, namespace=namespace,
                                 env={}) as as_ann:
        personal = await as_ann.write_memory("Ann keeps her notes in the blue notebook.",
                                             scope="personal")
        assert personal.outcome == "stored"
        assert (await as_ann.write_outcome(personal.event_id)).record_id == personal.record_id
        refused = await as_ann.write_memory("ok thanks", scope="personal")
        assert (refused.outcome, refused.record_id) == ("refused", None)
    async with httpx.AsyncClient(base_url=default_worker.base_url, timeout=20,
                                 headers={"Authorization": f"Bearer {bob}"}) as as_bob:
        hidden = [await as_bob.get(f"/v1/writes/{event_id}", params={"namespace": namespace})
                  for event_id in (personal.event_id, refused.event_id)]
    # As for the record: another agent's personal memory is no business of Bob's, nor is
    # what became of a personal write that memory refused.
    assert [answer.status_code for answer in hidden] == [404, 404], [a.text for a in hidden]
