"""Core blocks under review (MEMSTREAM_PROTECT=approved,core_blocks): an edit waits as a
pending diff, a newer one supersedes it, a review applies or drops it. Its own stack: the
session's worker leaves blocks unprotected, as the default does."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from harness.kafka_io import wait_caught_up
from harness.stack import Stack, Worker
from publisher.kafka_publisher import Publisher

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def protected_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with Stack(tmp_path_factory.mktemp("protected")) as running:
        yield running


@pytest.fixture(scope="module")
def protected_worker(protected_stack: Stack) -> Iterator[Worker]:
    running = protected_stack.worker(MEMSTREAM_SESSION_TIMEOUT_S="6",
                                     MEMSTREAM_PROTECT="approved,core_blocks")
    running.start()
    yield running
    running.stop()


async def test_a_protected_block_changes_only_through_review(
    protected_stack: Stack, protected_worker: Worker,
) -> None:
    namespace = f"ns-{uuid.uuid4().hex[:10]}"
    block = {"agent_id": "finn", "label": "persona"}
    bootstrap = protected_stack.broker.bootstrap
    async with Publisher(bootstrap, producer="agent-7") as publisher, \
            httpx.AsyncClient(base_url=protected_worker.base_url, headers=protected_worker.headers,
                              timeout=10) as http:
        first = await publisher.edit_block(namespace, "finn", "persona",
                                           set={"IDENTITY": "Release helper | AI"})
        second = await publisher.edit_block(namespace, "finn", "persona",
                                            set={"IDENTITY": "Release captain | AI"})
        await wait_caught_up(bootstrap, protected_worker.app_id, ["memory.events"])
        shown = await http.get("/v1/blocks/persona", params={"namespace": namespace,
                                                             "agent_id": "finn"})
        assert shown.status_code == 404, "nothing applied before review"
        pending = (await http.get("/v1/pending-diffs",
                                  params={"namespace": namespace})).json()["pending_diffs"]
        assert [(d["diff_id"], d["target"], d["block"], d["base_version"], d["proposed"])
                for d in pending] == [(second, "block", block, 0,
                                       {"set": {"IDENTITY": "Release captain | AI"}})], \
            f"{first} was superseded"

        await publisher.review_memory(namespace, None, block=block, decision="approve",
                                      reviewer="ana", diff_id=second)
        await wait_caught_up(bootstrap, protected_worker.app_id, ["memory.events"])
        shown = (await http.get("/v1/blocks/persona", params={"namespace": namespace,
                                                              "agent_id": "finn"})).json()
        assert (shown["version"], shown["text"]) == (1, "[IDENTITY] Release captain | AI")
        assert shown["versions"][0]["actor"] == "ana"

        third = await publisher.edit_block(namespace, "finn", "persona",
                                           append={"CONSTRAINTS": ["Never force-push"]})
        await publisher.review_memory(namespace, None, block=block, decision="reject",
                                      reviewer="ana", diff_id=third)
        await wait_caught_up(bootstrap, protected_worker.app_id, ["memory.events"])
        assert (await http.get("/v1/pending-diffs", params={
            "namespace": namespace})).json()["pending_diffs"] == []
        shown = (await http.get("/v1/blocks/persona", params={"namespace": namespace,
                                                              "agent_id": "finn"})).json()
        assert shown["version"] == 1, "a rejected diff changes nothing"
